package coordinator

import (
	"context"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
)

// MemberAdmin is what the coordinator observes and changes etcd's
// membership through: pkg/etcdadmin's Admin against a real cluster; the
// in-memory and error-injecting fakes of the executor's tests. Every
// implementation passes one contract (memberadmin_contract_test.go).
type MemberAdmin interface {
	// Observe lists the members with each one's health, raft index and
	// whether it leads. It fails only when the list cannot be read.
	Observe(ctx context.Context) ([]membership.Member, error)
	// AddLearner adds an unstarted learner at peerURL and returns its ID
	// and the --initial-cluster it must start with, under name.
	AddLearner(ctx context.Context, name, peerURL string) (api.MemberID, string, error)
	// Promote makes learner id a voter once it is ready, asking the leader
	// at leaderURL or, when that is "", the voters; progress, when not nil,
	// is told each higher raft index of the learner seen meanwhile.
	Promote(ctx context.Context, voters []string, id api.MemberID, learnerURL, leaderURL string, progress func(index uint64)) error
	// Remove removes member id; an absent member is not an error.
	Remove(ctx context.Context, id api.MemberID) error
	// MoveLeader asks the leader at leaderURL to hand leadership to to.
	MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error
}

var _ MemberAdmin = (*etcdadmin.Admin)(nil)

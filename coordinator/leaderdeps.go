package coordinator

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// leaderDeps are what the leader's controllers are built from, once per
// term (leaderControllers). A controller built from them keeps the few it
// uses, and not the Coordinator.
type leaderDeps struct {
	// name is the candidate's, written as the leader of what it journals.
	name  string
	st    *store.Store
	admin *etcdadmin.Admin
	// fence is the term's leader key: every write of the term is fenced on it.
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// metrics is nil when the candidate records none.
	metrics *metrics.Coordinator
	// obs is told of the decisions (Config.Observer; never nil).
	obs Observer
	// slots are the term's controllers waiting for the one-change slot.
	slots *slotWants
}

// leaderDeps returns the dependencies of the term fenced on fence.
func (c *Coordinator) leaderDeps(fence store.Fence) leaderDeps {
	return leaderDeps{name: c.cfg.Name, st: c.store, admin: c.admin, fence: fence,
		now: c.cfg.Clock.Now, log: c.log, metrics: c.Metrics, obs: c.cfg.Observer, slots: newSlotWants(c.cfg.Clock.Now, c.cfg.ResyncInterval)}
}

// membershipDeps are the membership controller's (reconciler.go,
// executor.go): the term's leaderDeps and what only it uses.
type membershipDeps struct {
	leaderDeps
	// clock wakes the controller while a learner is a member.
	clock clockwork.Clock
	// policy and healthTimeout are the candidate's (Config), each under
	// the EtcdCluster's own.
	policy        membership.Policy
	healthTimeout time.Duration
	// gossip is Config.Gossip; nil: liveness from the lease alone.
	gossip Gossip
	// live and lastNudge outlive the term: a successor term of the same
	// candidate goes on from them.
	live      *livenessTracker
	lastNudge *atomic.Int64
	// snaps takes the snapshot a change starts with.
	snaps *snapshotter
}

// membershipDeps returns the membership controller's dependencies in the
// term of d, whose snapshots snaps takes.
func (c *Coordinator) membershipDeps(d leaderDeps, snaps *snapshotter) membershipDeps {
	return membershipDeps{leaderDeps: d, clock: c.cfg.Clock, policy: c.cfg.Policy, healthTimeout: c.cfg.HealthTimeout,
		gossip: c.cfg.Gossip, live: c.live, lastNudge: &c.lastNudge, snaps: snaps}
}

// leaderMover is what the controllers that move etcd's leadership off a
// member (rollout, switch-guard) ask of etcd; MemberAdmin's methods.
type leaderMover interface {
	Observe(ctx context.Context) ([]membership.Member, error)
	MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error
}

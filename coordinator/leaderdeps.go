package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
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
}

// leaderDeps returns the dependencies of the term fenced on fence. Its
// clock reads c.Now on each call, so a test that replaces it is followed.
func (c *Coordinator) leaderDeps(fence store.Fence) leaderDeps {
	return leaderDeps{name: c.cfg.Name, st: c.store, admin: c.admin, fence: fence,
		now: func() time.Time { return c.Now() }, log: c.log, metrics: c.Metrics}
}

// leaderMover is what the controllers that move etcd's leadership off a
// member (rollout, switch-guard) ask of etcd; MemberAdmin's methods.
type leaderMover interface {
	Observe(ctx context.Context) ([]membership.Member, error)
	MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error
}

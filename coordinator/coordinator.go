// Package coordinator is nico's decision maker. Every control-plane node runs
// a candidate; one is leader, elected through etcd's concurrency package, and
// only the leader plans and applies membership changes. Each of its decisions
// is written in a transaction fenced on its leadership key.
//
//	         +------------------ session expired / error (backoff) -----------+
//	         v                                                                |
//	[new session] --campaign--> [leader: controller group] --term ends--> [resign, close session]
//
// While leader it runs its controllers (controllers.go) as one group on
// the controller runtime (package controller), under the term's context:
// they stop when the session expires, and a fenced write refused with
// store.ErrNotLeader ends the term.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Config holds a candidate's settings.
type Config struct {
	// Name identifies the candidate in the election and the journal.
	Name string
	// SessionTTL is the election session's lease TTL: how long a dead
	// leader keeps leadership.
	SessionTTL time.Duration
	// Policy bounds learners' start and progress.
	Policy membership.Policy
	// ResyncInterval is how often the leader re-reads everything besides
	// reacting to watch events (membership changes have no watch).
	ResyncInterval time.Duration
	// HealthTimeout bounds each call to one member.
	HealthTimeout time.Duration
	// Gossip is this candidate's member of the mesh; with it, node
	// liveness comes from gossip and the heartbeat lease together
	// (coordinator/liveness.go). nil: from the lease alone.
	Gossip Gossip
	// RevokeRemovedAfter is how long after its removal a node whose
	// heartbeat is still alive keeps its etcd identity
	// (coordinator/revoke.go); zero: DefaultRevokeRemovedAfter.
	RevokeRemovedAfter time.Duration
	// Clock is the candidate's one clock: the time its decisions are
	// made at and recorded with, the controllers' resync ticks and
	// backoffs, the term loop's backoff; nil: the real clock.
	Clock clockwork.Clock
	// Observer is told of the leader's decisions (observer.go); nil:
	// nobody is.
	Observer Observer
	// SnapshotTempDir holds a snapshot between its stream and its upload
	// ("": the system's temporary directory); coordinator/snapshots.go.
	SnapshotTempDir string
	// SnapshotStores opens spec.snapshots.destination
	// (coordinator/snapshots.go); nil: snapshot.Open, with the keys of a
	// bucket from the environment.
	SnapshotStores func(dest string) (snapshot.Store, error)
	// Journal is how much of ops/ the leader keeps (coordinator/journal.go);
	// zero: DefaultJournalPolicy.
	Journal JournalPolicy
	// Clusters are the Kubernetes cluster controller's side effects
	// (coordinator/kubernetescluster.go): its secrets, and the clusters'
	// APIs; zero: clusters get no PKI and no API is reached.
	Clusters ClusterHooks
	// Settle is how long the leader's controllers other than membership
	// let store events gather before they reconcile (controller.Settler);
	// zero: none. nico-coordinator runs with DefaultSettle.
	Settle time.Duration
}

// DefaultSettle is nico-coordinator's Settle. A join writes a dozen times
// within tens of milliseconds; without it every write wakes the status,
// version, compaction, rollout, pool, revocation, snapshot and Kubernetes
// controllers, whose reads and status writes compete with the join's on
// the store and delay its learner (docs/join-speed.md). Their answers are
// not needed within 100 ms.
const DefaultSettle = 100 * time.Millisecond

// Coordinator is one candidate.
type Coordinator struct {
	cfg   Config
	store *store.Store
	admin *etcdadmin.Admin
	log   *slog.Logger
	// maint is what the etcd-status controller observes and maintains
	// etcd through: admin, or what newCoordinator wrapped it in.
	maint maintenanceAdmin
	// Metrics, when set, records leadership, membership passes and rollout
	// steps (package metrics).
	Metrics *metrics.Coordinator

	live      *livenessTracker
	lastNudge atomic.Int64 // unix nanoseconds of the latest nudge (coordinator/nudge.go)
	rt        *controller.Runtime
	candidacy candidacy // what systemd is told (coordinator/health.go)
	// snapHold is what the leader's snapshotter keeps between passes and
	// terms (coordinator/snapshots.go).
	snapHold snapshotHold
}

// New returns a candidate. It starts nothing: call Run.
func New(cfg Config, st *store.Store, log *slog.Logger) *Coordinator {
	return newCoordinator(cfg, st, log, nil)
}

// newCoordinator is New; wrapMaint, when set, wraps what the etcd-status
// controller maintains etcd through (tests record the calls).
func newCoordinator(cfg Config, st *store.Store, log *slog.Logger, wrapMaint func(maintenanceAdmin) maintenanceAdmin) *Coordinator {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 10 * time.Second
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = time.Second
	}
	if cfg.Journal == (JournalPolicy{}) {
		cfg.Journal = DefaultJournalPolicy
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 2 * time.Second
	}
	if cfg.RevokeRemovedAfter <= 0 {
		cfg.RevokeRemovedAfter = DefaultRevokeRemovedAfter
	}
	if cfg.Policy == (membership.Policy{}) {
		cfg.Policy = membership.DefaultPolicy
	}
	if cfg.Clock == nil {
		// A test-only hook: a failpoints build may step it (tests/faults).
		cfg.Clock = failpoint.Clock(clockwork.NewRealClock())
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.SnapshotStores == nil {
		cfg.SnapshotStores = func(dest string) (snapshot.Store, error) { return snapshot.Open(dest, nil) }
	}
	log = log.With("component", "coordinator", "candidate", cfg.Name)
	c := &Coordinator{
		cfg:   cfg,
		store: st,
		admin: etcdadmin.New(st.Client(), cfg.HealthTimeout),
		log:   log,
		live:  newLivenessTracker(),
		rt: controller.New(st.Client(),
			controller.WithClock(cfg.Clock),
			controller.WithLogger(log),
			controller.WithBackoff(requeueBackoff),
			controller.WithFatal(isNotLeader)),
	}
	c.maint = c.admin
	if wrapMaint != nil {
		c.maint = wrapMaint(c.admin)
	}
	return c
}

// requeueBackoff is the leader controllers' retry policy: a failed step is
// retried soon (or at once on a change of its inputs), never later than
// a few seconds.
func requeueBackoff() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: 2 * time.Second}
}

// Health returns the record of each of the leader's controllers that ran
// on this candidate (package controller).
func (c *Coordinator) Health() []controller.Health { return c.rt.Health() }

// Run campaigns and, while leader, reconciles. It returns nil when ctx ends,
// after resigning. A term that ended on an error is followed by the next
// after a backoff; one that ended cleanly resets it.
func (c *Coordinator) Run(ctx context.Context) error {
	defer c.admin.Close()
	b := &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 5 * time.Second}
	for {
		err := c.term(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			b.Reset()
		} else {
			c.log.Warn("leadership term ended", "err", err)
		}
		t := c.cfg.Clock.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.Chan():
		}
	}
}

// term runs one election session: campaign, then lead until the session or
// ctx ends.
func (c *Coordinator) term(ctx context.Context) error {
	sess, err := concurrency.NewSession(c.store.Client(), concurrency.WithTTL(int(c.cfg.SessionTTL.Seconds())), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("coordinator: session: %w", err)
	}
	defer sess.Close()
	c.candidacy.campaigning(sess)
	// Campaign does not return when the session expires: tie its context
	// to the session.
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-tctx.Done():
		}
	}()
	e := concurrency.NewElection(sess, store.ElectionPrefix)
	if err := e.Campaign(tctx, c.cfg.Name); err != nil {
		if tctx.Err() != nil && ctx.Err() == nil {
			return errors.New("coordinator: session expired while campaigning")
		}
		return fmt.Errorf("coordinator: campaign: %w", err)
	}
	fence := store.Fence{Key: e.Key(), Rev: e.Rev()}
	c.log.Info("elected leader", "key", fence.Key, "rev", fence.Rev)
	c.cfg.Observer.LeaderElected(fence)
	c.Metrics.Leading(true)
	defer c.Metrics.Leading(false)
	// The membership, rollout, machine-pool and revocation controllers run
	// as one group until the term ends; store.ActiveOpKey keeps rollout
	// steps and membership changes apart (coordinator/rollout.go).
	err = c.rt.Run(tctx, c.leaderControllers(fence)...)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer rcancel()
	if rerr := e.Resign(rctx); rerr != nil {
		c.log.Debug("resign", "err", rerr)
	} else {
		c.log.Info("resigned leadership")
	}
	if tctx.Err() != nil && ctx.Err() == nil {
		return errors.New("coordinator: session expired; leadership lost")
	}
	return err
}

// Leader returns the name of the current leader, or "" when there is none.
func Leader(ctx context.Context, st *store.Store) (string, error) {
	return st.Leader(ctx)
}

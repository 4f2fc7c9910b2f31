package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
)

// The leader's snapshots (issue 15, "Snapshots"): the snapshot controller
// (snapshotsched.go) takes one every spec.snapshots.interval, and the
// membership executor and the rollout controller take one before every
// membership change and every control-plane rollout step (before). Each is
// streamed from a healthy voter (a follower before the leader), checked
// like `etcdutl snapshot status`, and put in spec.snapshots.destination,
// which is off the node it was taken on (a share or a bucket); the local
// file is removed. The outcome goes to status.snapshots, fenced.
//
// A failed snapshot before a change:
//
//	beforeChange  the change                     journaled in
//	Required      waits; retried after           the request's status (join, removal)
//	              snapshotRetryAfter             or the rollout's message
//	BestEffort    goes on                        the operation's history
//	Off           no snapshot is taken
//
// Required is the default: a change is what a snapshot protects against,
// and a store that is down is something to fix first. Nothing of the
// change has happened when it waits (no operation is journaled, no member
// added, no configuration written).

// snapshotRetryAfter is how long after a failed snapshot before a change
// the next attempt waits, so that a store that is down is not hammered by
// every membership pass.
const snapshotRetryAfter = 30 * time.Second

// maxBeforeChangeTimeout bounds a snapshot before a change, whatever
// spec.snapshots.timeout says: it blocks the pass that makes the change.
const maxBeforeChangeTimeout = 4 * time.Minute

// errSnapshotHeld: a change waits for a snapshot (spec.snapshots.beforeChange
// Required) that failed.
var errSnapshotHeld = errors.New("coordinator: the change waits for a snapshot")

// snapshotter takes the leader's snapshots, one per term; what it keeps
// between passes is the candidate's (hold).
type snapshotter struct {
	name string
	st   *store.Store
	// admin lists the members to take a snapshot from.
	admin *etcdadmin.Admin
	now   func() time.Time
	log   *slog.Logger
	// open opens spec.snapshots.destination (Config.SnapshotStores).
	open func(dest string) (snapshot.Store, error)
	// tempDir is Config.SnapshotTempDir.
	tempDir string
	// metrics is nil when the candidate records none.
	metrics *metrics.Snapshots
	hold    *snapshotHold
}

// snapshotHold is what holds a change back after a failed snapshot before
// it; the candidate's, across its terms.
type snapshotHold struct {
	mu sync.Mutex
	// heldUntil: no snapshot before a change is tried again before it.
	heldUntil time.Time
	heldErr   error
}

// snapshotter returns the snapshotter of the term of d.
func (c *Coordinator) snapshotter(d leaderDeps) *snapshotter {
	s := &snapshotter{name: d.name, st: d.st, admin: d.admin, now: d.now, log: d.log,
		open: c.cfg.SnapshotStores, tempDir: c.cfg.SnapshotTempDir, hold: &c.snapHold}
	if d.metrics != nil {
		s.metrics = d.metrics.Snapshots
	}
	return s
}

// take takes one snapshot into spec's destination, prunes by spec's
// retention and records it (or the failure) in status.snapshots.
func (s *snapshotter) take(ctx context.Context, fence store.Fence, spec api.EtcdSnapshotsSpec, reason, trigger string) (snapshot.Meta, string, error) {
	m, where, err := s.save(ctx, spec, reason)
	now := s.now()
	if err != nil {
		s.metrics.Failed(trigger)
		s.log.Warn("etcd snapshot failed", "reason", reason, "err", err)
		if rerr := s.updateStatus(ctx, fence, func(st *api.EtcdSnapshotsStatus) {
			st.LastFailure, st.LastFailureAt = fmt.Sprintf("%s: %v", reason, err), now
		}); rerr != nil {
			return m, where, errors.Join(err, rerr)
		}
		return m, where, err
	}
	s.metrics.Taken(trigger)
	s.metrics.Observe(m.TakenAt, m.Size, time.Duration(spec.Interval))
	s.log.Info("etcd snapshot stored", "snapshot", m.Name, "where", where, "member", m.MemberName, "revision", m.Revision, "size", m.Size, "reason", reason)
	if spec.Keep > 0 || spec.MaxAge > 0 {
		st, err := s.open(spec.Destination)
		if err == nil {
			var gone []string
			gone, err = snapshot.Prune(ctx, st, snapshot.Retention{Keep: spec.Keep, MaxAge: time.Duration(spec.MaxAge)}, now)
			if len(gone) > 0 {
				s.log.Info("etcd snapshots pruned", "where", where, "removed", gone)
			}
		}
		if err != nil {
			// The snapshot is stored; the next one prunes again.
			s.log.Warn("etcd snapshot retention", "where", where, "err", err)
		}
	}
	// Last, so that a status naming the snapshot also says the store
	// was pruned for it.
	rec := &api.SnapshotRecord{Name: m.Name, Where: where, TakenAt: m.TakenAt, Revision: m.Revision, Size: m.Size, Member: m.MemberName, Reason: reason}
	if err := s.updateStatus(ctx, fence, func(st *api.EtcdSnapshotsStatus) { st.Last = rec }); err != nil {
		return m, where, err
	}
	return m, where, nil
}

// save streams a snapshot from a healthy voter into the destination.
func (s *snapshotter) save(ctx context.Context, spec api.EtcdSnapshotsSpec, reason string) (snapshot.Meta, string, error) {
	st, err := s.open(spec.Destination)
	if err != nil {
		return snapshot.Meta{}, spec.Destination, err
	}
	ctx, cancel := context.WithTimeout(ctx, spec.TimeoutOrDefault())
	defer cancel()
	ms, err := s.admin.Statuses(ctx)
	if err != nil {
		return snapshot.Meta{}, st.Where(), err
	}
	src, err := snapshot.PickSource(ms, s.name) // a candidate is named after its node
	if err != nil {
		return snapshot.Meta{}, st.Where(), err
	}
	m, err := snapshot.Save(ctx, src, etcdclient.TLSOf(s.st.Client()), st,
		snapshot.TakeOptions{Dir: s.tempDir, Now: s.now, Reason: reason})
	return m, st.Where(), err
}

// before takes the snapshot a change (what: "join of cp-4", "rollout r1
// step 3") waits for, as spec.snapshots.beforeChange says. It returns the
// line to journal with the change ("" when none is taken) and, when the
// change must wait, an error wrapping errSnapshotHeld that says why.
func (s *snapshotter) before(ctx context.Context, fence store.Fence, ec *api.EtcdCluster, what string) (string, error) {
	if ec == nil {
		return "", nil
	}
	spec := ec.Spec.Snapshots
	policy := spec.BeforeChangePolicy()
	if policy == api.SnapshotOff {
		return "", nil
	}
	now := s.now()
	s.hold.mu.Lock()
	held, heldErr := s.hold.heldUntil, s.hold.heldErr
	s.hold.mu.Unlock()
	if policy == api.SnapshotRequired && now.Before(held) {
		return "", fmt.Errorf("%w: %s: the last attempt failed (%v); next try at %s (spec.snapshots.beforeChange is %s)",
			errSnapshotHeld, what, heldErr, held.UTC().Format(time.RFC3339), api.SnapshotRequired)
	}
	// It runs inside the membership or rollout pass, which the controller
	// runtime counts as stalled after 5 minutes.
	spec.Timeout = api.Duration(min(spec.TimeoutOrDefault(), maxBeforeChangeTimeout))
	m, where, err := s.take(ctx, fence, spec, snapshot.ReasonBeforeOp+" "+what, metrics.TriggerBeforeChange)
	if errors.Is(err, store.ErrNotLeader) {
		return "", err
	}
	if err == nil {
		s.hold.mu.Lock()
		s.hold.heldUntil, s.hold.heldErr = time.Time{}, nil
		s.hold.mu.Unlock()
		return fmt.Sprintf("snapshot %s taken before the change (revision %d, %d bytes, from %s) into %s", m.Name, m.Revision, m.Size, m.MemberName, where), nil
	}
	if policy == api.SnapshotBestEffort {
		return fmt.Sprintf("the snapshot before the change failed, going on (spec.snapshots.beforeChange is %s): %v", api.SnapshotBestEffort, err), nil
	}
	s.hold.mu.Lock()
	s.hold.heldUntil, s.hold.heldErr = now.Add(snapshotRetryAfter), err
	s.hold.mu.Unlock()
	return "", fmt.Errorf("%w: %s: the snapshot before it failed, nothing was changed; retried in %v (spec.snapshots.beforeChange is %s; %s goes on without one): %w",
		errSnapshotHeld, what, snapshotRetryAfter, api.SnapshotRequired, api.SnapshotBestEffort, err)
}

// updateStatus applies fn to the EtcdCluster's status.snapshots and
// writes it fenced and compare-and-swapped on the object's revision,
// re-reading on a concurrent write (the etcd-status controller's, a spec
// applied meanwhile).
func (s *snapshotter) updateStatus(ctx context.Context, fence store.Fence, fn func(*api.EtcdSnapshotsStatus)) error {
	if err := updateEtcdCluster(ctx, s.st, fence, func(ec *api.EtcdCluster) { fn(&ec.Status.Snapshots) }); err != nil {
		return fmt.Errorf("coordinator: snapshot status: %w", err)
	}
	return nil
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
)

// The snapshot controller (a leader controller, controllers.go) keeps the
// schedule of spec.snapshots: each pass re-reads the EtcdCluster and the
// newest restore drill's report, and
//
//   - takes a snapshot when spec.snapshots.interval has passed since
//     status.snapshots.last was taken (a new leader goes on from its
//     predecessor's last one), unless the last failure is more recent
//     than scheduleRetryAfter;
//   - copies the drill report (nicoctl snapshot verify) into
//     status.snapshots.lastVerified, fenced;
//   - sets the snapshot metrics from status.
//
// Time comes from the coordinator's clock; the pass runs on the resync
// tick and on every write of the EtcdCluster or the drill report.

// scheduleRetryAfter bounds how often a failing scheduled snapshot is
// tried again (the interval, when shorter).
const scheduleRetryAfter = time.Minute

// snapshotSchedule is the snapshot controller of one term.
type snapshotSchedule struct {
	st    *store.Store
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// met is nil when the candidate records no metrics.
	met   *metrics.Snapshots
	snaps *snapshotter
	// open opens spec.snapshots.destination.
	open func(dest string) (snapshot.Store, error)
}

// newSnapshotSchedule returns the snapshot controller of the term of d,
// taking its snapshots with snaps and opening destinations as it does.
func newSnapshotSchedule(d leaderDeps, snaps *snapshotter) *snapshotSchedule {
	s := &snapshotSchedule{st: d.st, fence: d.fence, now: d.now, log: d.log, snaps: snaps, open: snaps.open}
	if d.metrics != nil {
		s.met = d.metrics.Snapshots
	}
	return s
}

// reconcile is the snapshot controller's Reconcile.
func (s *snapshotSchedule) reconcile(ctx context.Context) error {
	ec := &api.EtcdCluster{}
	if err := s.st.Get(ctx, store.EtcdClusterKey, ec); errors.Is(err, store.ErrNotFound) {
		return nil // the membership controller writes the bootstrap one
	} else if err != nil {
		return fmt.Errorf("snapshots: %w", err)
	}
	if err := s.foldDrill(ctx, ec); err != nil {
		return fmt.Errorf("snapshots: drill report: %w", err)
	}
	spec, st := ec.Spec.Snapshots, ec.Status.Snapshots
	interval := time.Duration(spec.Interval)
	if st.Last != nil {
		s.met.Observe(st.Last.TakenAt, st.Last.Size, interval)
	} else {
		s.met.Observe(time.Time{}, 0, interval)
	}
	if !spec.Enabled() || interval <= 0 {
		return nil
	}
	now := s.now()
	if st.Last != nil && now.Sub(st.Last.TakenAt) < interval {
		return nil
	}
	if !st.LastFailureAt.IsZero() && now.Sub(st.LastFailureAt) < min(interval, scheduleRetryAfter) {
		return nil
	}
	if adopted, err := s.adoptNewer(ctx, spec, st.Last, now); err != nil || adopted {
		return err
	}
	_, _, err := s.snaps.take(ctx, s.fence, spec, snapshot.ReasonScheduled, metrics.TriggerScheduled)
	if errors.Is(err, store.ErrNotLeader) {
		return err
	}
	// A failure is in status.snapshots.lastFailure, the failures counter
	// and the log; the next try waits scheduleRetryAfter.
	return nil
}

// adoptNewer makes the newest stored snapshot of this cluster
// status.snapshots.last when it is newer than last and younger than the
// interval: one taken on demand (nicoctl snapshot save) resets the
// schedule. A store that cannot be listed is left to take's own error.
func (s *snapshotSchedule) adoptNewer(ctx context.Context, spec api.EtcdSnapshotsSpec, last *api.SnapshotRecord, now time.Time) (bool, error) {
	st, err := s.open(spec.Destination)
	if err != nil {
		return false, nil
	}
	ms, err := st.List(ctx)
	if err != nil {
		return false, nil
	}
	resp, err := s.st.Client().MemberList(ctx)
	if err != nil {
		return false, fmt.Errorf("snapshots: %w", err)
	}
	for _, m := range ms { // newest first
		if m.ClusterID != api.MemberID(resp.Header.ClusterId) {
			continue
		}
		if now.Sub(m.TakenAt) >= time.Duration(spec.Interval) || (last != nil && !m.TakenAt.After(last.TakenAt)) {
			return false, nil
		}
		rec := &api.SnapshotRecord{Name: m.Name, Where: st.Where(), TakenAt: m.TakenAt, Revision: m.Revision, Size: m.Size, Member: m.MemberName, Reason: m.Reason}
		if err := s.snaps.updateStatus(ctx, s.fence, func(st *api.EtcdSnapshotsStatus) { st.Last = rec }); err != nil {
			return false, err
		}
		s.met.Observe(m.TakenAt, m.Size, time.Duration(spec.Interval))
		s.log.Info("etcd snapshot taken elsewhere counts as the scheduled one", "snapshot", m.Name, "reason", m.Reason)
		return true, nil
	}
	return false, nil
}

// foldDrill copies the newest drill report into status.snapshots.lastVerified
// when it is not there yet.
func (s *snapshotSchedule) foldDrill(ctx context.Context, ec *api.EtcdCluster) error {
	d := &api.SnapshotDrill{}
	if err := s.st.Get(ctx, store.SnapshotDrillKey, d); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if lv := ec.Status.Snapshots.LastVerified; lv != nil && *lv == d.Status {
		return nil
	}
	v := d.Status
	if err := s.snaps.updateStatus(ctx, s.fence, func(st *api.EtcdSnapshotsStatus) { st.LastVerified = &v }); err != nil {
		return err
	}
	ec.Status.Snapshots.LastVerified = &v
	s.log.Info("restore drill recorded", "snapshot", v.Name, "ok", v.OK, "keys", v.Keys, "revision", v.Revision)
	return nil
}

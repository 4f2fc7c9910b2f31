package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/coordinator/internal/compaction"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The compaction controller (a leader controller, controllers.go) owns the
// compaction of nico's etcd, which nothing else compacts (etcd's
// auto-compaction is off, the Kubernetes API servers on it run with
// --etcd-compaction-interval=0). Each pass samples the store's revision on
// the coordinator's clock, and compacts to the revision package compaction
// plans from spec.policy.compactionRetention and compactionMinRevisions:
// never while a restore or recovery holds the one-change slot, at most
// once per interval (a tenth of the retention). Compaction frees the old
// revisions inside the database; the defragmentation of the etcd-status
// controller (etcddefrag.go) then returns the space to the disk, as the
// fragmentation it measures grows. spec.policy.compactionDisabled turns
// it off, for operators who compact by other means.
//
// The compaction is made after a fenced transaction that checks the term
// and that the slot is as read (nothing is written by it), and recorded
// in status.compaction fenced after; a term that ends between the check
// and the call compacts no more than its policy allowed.
type etcdCompactor struct {
	st    *store.Store
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// met is nil when the candidate records no metrics.
	met     *metrics.Compaction
	history compaction.History
}

// newEtcdCompactor returns the compaction controller of the term of d.
func newEtcdCompactor(d leaderDeps) *etcdCompactor {
	k := &etcdCompactor{st: d.st, fence: d.fence, now: d.now, log: d.log}
	if d.metrics != nil {
		k.met = d.metrics.Compaction
	}
	return k
}

// reconcile is the compaction controller's Reconcile.
func (k *etcdCompactor) reconcile(ctx context.Context) error {
	ec := &api.EtcdCluster{}
	if err := k.st.Get(ctx, store.EtcdClusterKey, ec); errors.Is(err, store.ErrNotFound) {
		return nil // the membership controller writes the bootstrap one
	} else if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	if ec.Spec.Policy.CompactionDisabled {
		k.log.Debug("etcd compaction", "reason", "spec.policy.compactionDisabled")
		return nil
	}
	pol := compaction.Policy{Retention: time.Duration(ec.Spec.Policy.CompactionRetention), MinRevisions: ec.Spec.Policy.CompactionMinRevisions}
	// The revision first, the slot after: a slot taken before the
	// revision was read is seen.
	rev, err := k.st.Revision(ctx)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	now := k.now()
	k.history.Add(compaction.Sample{At: now, Revision: rev}, pol)
	slot, blocked, err := k.slot(ctx)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	last := ec.Status.Compaction
	defer func() { k.met.Observe(rev, last.Revision, last.CompactedAt) }()
	d := compaction.Plan(compaction.Observed{Now: now, Revision: rev, Compacted: last.Revision, CompactedAt: last.CompactedAt,
		Blocked: blocked, Samples: k.history.Samples()}, pol)
	if !d.Compact {
		k.log.Debug("etcd compaction", "revision", rev, "compacted", last.Revision, "reason", d.Reason)
		return nil
	}
	// Still leading, and the slot as read (a restore may have taken it).
	if _, err := k.st.FencedTxn(ctx, k.fence, []store.Guard{slot}); err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	if _, err := k.st.Client().Compact(ctx, d.Revision); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		k.met.Failed()
		return fmt.Errorf("compaction: compact to %d: %w", d.Revision, err)
	}
	next := api.EtcdCompactionStatus{Revision: d.Revision, CompactedAt: now, RetainedSince: d.RetainedSince}
	if err := k.record(ctx, next); err != nil {
		return fmt.Errorf("compaction: record: %w", err)
	}
	last = next
	k.met.Compacted()
	k.log.Info("compacted etcd", "revision", d.Revision, "current", rev, "retainedSince", d.RetainedSince, "why", d.Reason)
	return nil
}

// slot reads the one-change slot: a guard that holds while it is as read,
// and what of it forbids a compaction ("" when nothing does).
func (k *etcdCompactor) slot(ctx context.Context) (store.Guard, string, error) {
	g := store.Guard{Err: fmt.Errorf("%w: %s moved", store.ErrConflict, store.ActiveOpKey)}
	kv, err := k.st.GetKV(ctx, store.ActiveOpKey)
	if errors.Is(err, store.ErrNotFound) || (err == nil && kv == nil) {
		g.Cmp = store.Absent(store.ActiveOpKey)
		return g, "", nil
	} else if err != nil {
		return g, "", err
	}
	g.Cmp = store.Unchanged(store.ActiveOpKey, kv.ModRevision)
	op, err := k.st.OpAt(ctx, string(kv.Value), kv.ModRevision)
	if err != nil {
		return g, "", err
	}
	if t := op.Spec.Type; (t == api.OpRestore || t == api.OpRecover) && op.Status.Phase == api.OpRunning {
		return g, fmt.Sprintf("%s %s is in flight", t, op.Metadata.Name), nil
	}
	return g, "", nil
}

// record writes status.compaction, fenced and compare-and-swapped on the
// object (a spec applied meanwhile is re-read and kept).
func (k *etcdCompactor) record(ctx context.Context, next api.EtcdCompactionStatus) error {
	return updateEtcdCluster(ctx, k.st, k.fence, func(ec *api.EtcdCluster) { ec.Status.Compaction = next })
}

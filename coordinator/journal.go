package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The journal controller (a leader controller, controllers.go) bounds
// ops/, the journal of every change the leader made (joins, removals,
// rollout steps, switches, defragmentations, version rolls) and that
// nicoctl get ops and the events feed show. A finished operation goes
// once it is older than JournalPolicy.For and not among the newest
// JournalPolicy.Keep finished ones; a running one never goes, nor the
// record of a restore or recovery (the cluster's lineage names it).
//
// It passes on the leader's resync tick like the others, and reads the
// journal at most once each JournalEvery.
//
//	ops/ (at most each JournalEvery) --> prunable --> delete, fenced, each guarded unchanged since read
type journal struct {
	st     *store.Store
	fence  store.Fence
	now    func() time.Time
	log    *slog.Logger
	policy JournalPolicy
	// last is when the journal was last pruned (zero: not yet this term).
	last time.Time
}

// JournalPolicy is how much of the journal the leader keeps.
type JournalPolicy struct {
	// Keep is how many finished operations stay whatever their age.
	Keep int
	// For is how long a finished operation stays.
	For time.Duration
}

// DefaultJournalPolicy keeps a week of operations, and the newest 100.
var DefaultJournalPolicy = JournalPolicy{Keep: 100, For: 7 * 24 * time.Hour}

// JournalEvery is how often the journal controller reads the journal.
const JournalEvery = 10 * time.Minute

// journalBatch bounds the deletions of one transaction (etcd refuses a
// transaction of more than 128 operations by default).
const journalBatch = 50

// prunable returns the operations of ops that pol lets go at now, oldest
// first: finished, ended (last updated) before now-pol.For, not among the
// pol.Keep newest finished, and not a restore's or recovery's record.
func prunable(ops []*api.Operation, now time.Time, pol JournalPolicy) []*api.Operation {
	var done []*api.Operation
	for _, op := range ops {
		if op.Status.Phase == api.OpRunning || op.Status.Phase == "" ||
			op.Spec.Type == api.OpRestore || op.Spec.Type == api.OpRecover {
			continue
		}
		done = append(done, op)
	}
	// Newest first; equal times by name, so the choice is stable.
	slices.SortFunc(done, func(a, b *api.Operation) int {
		return cmp.Or(b.Status.UpdatedAt.Compare(a.Status.UpdatedAt), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	var out []*api.Operation
	for i := len(done) - 1; i >= min(pol.Keep, len(done)); i-- {
		if done[i].Status.UpdatedAt.Before(now.Add(-pol.For)) {
			out = append(out, done[i])
		}
	}
	return out
}

// reconcile deletes what prunable names, in fenced transactions each of
// which holds only while every operation it deletes is as read.
func (j *journal) reconcile(ctx context.Context) error {
	now := j.now()
	if !j.last.IsZero() && now.Sub(j.last) < JournalEvery {
		return nil
	}
	ops, _, err := store.List[api.Operation](ctx, j.st, store.OpsDir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	gone := prunable(ops, now, j.policy)
	if err := j.prune(ctx, gone); err != nil {
		return err
	}
	j.last = now
	if len(gone) > 0 {
		j.log.Info("journal pruned", "operations", len(gone), "kept", len(ops)-len(gone))
	}
	return nil
}

// prune deletes gone, journalBatch at a time; a batch whose operations
// are not all as read is left for the next pass.
func (j *journal) prune(ctx context.Context, gone []*api.Operation) error {
	for batch := range slices.Chunk(gone, journalBatch) {
		var guards []store.Guard
		var dels []clientv3.Op
		for _, op := range batch {
			g, err := store.UnchangedGuard(op)
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			d, err := store.DeleteObjectOp(op)
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			guards, dels = append(guards, g), append(dels, d)
		}
		if _, err := j.st.FencedTxn(ctx, j.fence, guards, dels...); errors.Is(err, store.ErrConflict) {
			return nil // one changed since read: the next pass reads again
		} else if err != nil {
			return fmt.Errorf("journal: delete %d operations: %w", len(batch), err)
		}
	}
	return nil
}

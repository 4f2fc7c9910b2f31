package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

func journaled(name string, typ api.OpType, phase api.OpPhase, ended time.Time) *api.Operation {
	op := api.NewOperation(name)
	op.Spec.Type = typ
	op.Status.Phase, op.Status.UpdatedAt = phase, ended
	return op
}

// TestPrunable: a finished operation goes once it is older than For and
// not among the Keep newest finished ones; running operations and the
// records of restores and recoveries stay whatever their age.
func TestPrunable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	pol := JournalPolicy{Keep: 2, For: 7 * day}
	old, recent := now.Add(-30*day), now.Add(-day)
	for _, tc := range []struct {
		name string
		ops  []*api.Operation
		want []string
	}{
		{"empty", nil, nil},
		{"old, beyond the newest two", []*api.Operation{
			journaled("a", api.OpJoin, api.OpSucceeded, old.Add(1)),
			journaled("b", api.OpJoin, api.OpFailed, old.Add(2)),
			journaled("c", api.OpRemove, api.OpSucceeded, old.Add(3)),
			journaled("d", api.OpSwitch, api.OpSucceeded, old.Add(4)),
		}, []string{"a", "b"}},
		{"recent ones stay beyond Keep", []*api.Operation{
			journaled("a", api.OpJoin, api.OpSucceeded, recent),
			journaled("b", api.OpJoin, api.OpSucceeded, recent.Add(1)),
			journaled("c", api.OpJoin, api.OpSucceeded, recent.Add(2)),
		}, nil},
		{"old ones stay within Keep", []*api.Operation{
			journaled("a", api.OpJoin, api.OpSucceeded, old),
			journaled("b", api.OpJoin, api.OpSucceeded, old.Add(1)),
		}, nil},
		{"the age bound is For exactly", []*api.Operation{
			journaled("at", api.OpJoin, api.OpSucceeded, now.Add(-7*day)),
			journaled("past", api.OpJoin, api.OpSucceeded, now.Add(-7*day-1)),
			journaled("k1", api.OpJoin, api.OpSucceeded, recent),
			journaled("k2", api.OpJoin, api.OpSucceeded, recent),
		}, []string{"past"}},
		{"running, restores and recoveries stay and do not count", []*api.Operation{
			journaled("run", api.OpJoin, api.OpRunning, old),
			journaled("restore", api.OpRestore, api.OpSucceeded, old),
			journaled("recover", api.OpRecover, api.OpFailed, old),
			journaled("a", api.OpJoin, api.OpSucceeded, old),
			journaled("b", api.OpJoin, api.OpSucceeded, old.Add(1)),
			journaled("c", api.OpJoin, api.OpSucceeded, old.Add(2)),
		}, []string{"a"}},
		{"equal times: by name", []*api.Operation{
			journaled("z", api.OpJoin, api.OpSucceeded, old),
			journaled("y", api.OpJoin, api.OpSucceeded, old),
			journaled("x", api.OpJoin, api.OpSucceeded, old),
		}, []string{"z"}},
	} {
		var got []string
		for _, op := range prunable(tc.ops, now, pol) {
			got = append(got, op.Metadata.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: pruned %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJournalPrunes: the controller deletes the prunable operations in
// several transactions and keeps the rest; an operation changed since its
// read is kept; a deposed leader deletes nothing. It runs on a memory
// etcd, its clock moved by the test.
func TestJournalPrunes(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ctx := t.Context()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	old := clk.Now().Add(-30 * 24 * time.Hour)
	const n = 130 // more than two transactions' worth beyond Keep
	for i := range n {
		op := journaled(fmt.Sprintf("op-%03d", i), api.OpJoin, api.OpSucceeded, old.Add(time.Duration(i)*time.Second))
		if err := st.PutObject(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutObject(ctx, journaled("running", api.OpJoin, api.OpRunning, old)); err != nil {
		t.Fatal(err)
	}
	_, fence := leaderTerm(t, st, "a")
	pol := JournalPolicy{Keep: 10, For: 7 * 24 * time.Hour}
	j := &journal{st: st, fence: fence, now: clk.Now, log: slog.New(slog.DiscardHandler), policy: pol}

	names := func() []string {
		t.Helper()
		got, err := st.Names(ctx, store.OpsDir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for name := range got {
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	// A deposed leader's pass deletes nothing.
	deposed := *j
	deposed.fence.Rev++
	if err := deposed.reconcile(ctx); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("a deposed leader's pass: %v, want ErrNotLeader", err)
	}
	if got := names(); len(got) != n+1 {
		t.Fatalf("a deposed leader deleted: %d operations left, want %d", len(got), n+1)
	}
	if err := j.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"op-120", "op-121", "op-122", "op-123", "op-124", "op-125", "op-126", "op-127", "op-128", "op-129", "running"}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	// An operation changed since it was read is not deleted, nor the
	// others of its transaction.
	stale := journaled("op-120", api.OpJoin, api.OpSucceeded, old)
	if err := st.Get(ctx, store.OpKey("op-120"), stale); err != nil {
		t.Fatal(err)
	}
	other := journaled("op-121", api.OpJoin, api.OpSucceeded, old)
	if err := st.Get(ctx, store.OpKey("op-121"), other); err != nil {
		t.Fatal(err)
	}
	changed := *stale
	changed.Status.Message = "rewritten"
	if err := st.UpdateObject(ctx, &changed); err != nil {
		t.Fatal(err)
	}
	if err := j.prune(ctx, []*api.Operation{other, stale}); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("after pruning a changed operation: %v, want %v", got, want)
	}
	// The journal is read at most once each JournalEvery: an operation
	// that falls out of the policy meanwhile goes at the first pass after.
	if err := st.PutObject(ctx, journaled("op-000", api.OpJoin, api.OpSucceeded, old)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(JournalEvery - time.Second)
	if err := j.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Contains(got, "op-000") {
		t.Fatalf("pruned %v within JournalEvery of the last pass", got)
	}
	clk.Advance(time.Second)
	if err := j.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("JournalEvery after the last pass: %v, want %v", got, want)
	}
	// Nothing more to prune: a pass writes nothing.
	before, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(JournalEvery)
	if err := j.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := st.Revision(ctx); after != before {
		t.Fatalf("a pass with nothing to prune wrote (revision %d, then %d)", before, after)
	}
}

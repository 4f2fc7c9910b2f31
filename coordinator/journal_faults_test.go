package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestJournalReturnsStoreErrors: a read or a deletion the store fails is
// returned, wrapped, for the runtime to retry; the pass does not count as
// done, so the next one, without waiting JournalEvery, reads again and
// prunes what the failed one could not.
func TestJournalReturnsStoreErrors(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ctx := t.Context()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	old := clk.Now().Add(-30 * 24 * time.Hour)
	for i := range 3 {
		if err := st.PutObject(ctx, journaled(fmt.Sprintf("op-%d", i), api.OpJoin, api.OpSucceeded, old)); err != nil {
			t.Fatal(err)
		}
	}
	_, fence := leaderTerm(t, st, "a")
	j := &journal{st: st, fence: fence, now: clk.Now, log: slog.New(slog.DiscardHandler), policy: JournalPolicy{Keep: 1, For: time.Hour}}
	faults := &memetcd.Faults{}
	faults.Wrap(st.Client())
	count := func() int {
		t.Helper()
		names, err := st.Names(ctx, store.OpsDir)
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}

	faults.Add(memetcd.Fault{Kinds: memetcd.Get, Prefix: store.OpsDir, Times: 1, Err: memetcd.ErrUnavailable})
	if err := j.reconcile(ctx); !errors.Is(err, memetcd.ErrUnavailable) {
		t.Fatalf("pass whose read failed: %v, want the store's error", err)
	}
	faults.Add(memetcd.Fault{Kinds: memetcd.Txn, Prefix: store.OpsDir, Times: 1, Err: rpctypes.ErrNoSpace})
	if err := j.reconcile(ctx); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("pass whose deletion failed: %v, want ErrNoSpace", err)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d operations after failed passes, want 3", n)
	}
	if err := j.reconcile(ctx); err != nil {
		t.Fatalf("pass after the faults: %v", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d operations after the retry, want 1 (Keep)", n)
	}
	if n := faults.Failed(); n != 2 {
		t.Fatalf("%d operations failed, want 2", n)
	}
}

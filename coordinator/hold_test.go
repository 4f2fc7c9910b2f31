package coordinator

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// TestLeaderKeepsOffAHeldCluster: a cluster restored from a snapshot
// answers with a new cluster ID while its data still records the old one;
// the leader plans and writes nothing there (here: no EtcdCluster status)
// until the restore records the new ID. A running restore in the
// one-change slot holds the cluster the same way until it ends.
func TestLeaderKeepsOffAHeldCluster(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	real := resp.Header.ClusterId
	// The snapshot's record: the cluster it was taken from.
	idKey := "cluster-id" // store.ClusterIDKey; cli is scoped to the prefix
	if _, err := cli.Put(ctx, idKey, fmt.Sprintf("%016x", real^0xff)); err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	c := New(Config{Name: "a", SessionTTL: 5 * time.Second, ResyncInterval: time.Minute, Clock: clk}, st, slog.New(slog.DiscardHandler))
	defer runInBackground(t, c)()
	status := func() api.EtcdClusterStatus {
		got := api.NewEtcdCluster()
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	passes := func() uint64 {
		for _, h := range c.Health() {
			if h.Name == "etcd-status" {
				return h.Reconciles
			}
		}
		return 0
	}
	// Passes of the leader's controllers, each on a resync tick.
	held := func(what string) {
		t.Helper()
		from := passes()
		for range 3 {
			// want is read before the clock moves: a pass that the move
			// wakes may end before a later read.
			want := passes() + 1
			testwait.For(t, 30*time.Second, "an etcd-status pass "+what, func() (bool, string) {
				if passes() >= want {
					return true, ""
				}
				clk.Advance(time.Minute)
				return false, fmt.Sprintf("%d passes", passes())
			})
		}
		if passes() < from+3 {
			t.Fatalf("%d etcd-status passes %s, want 3", passes()-from, what)
		}
	}
	held("while the restored data records the old cluster")
	if got := status(); !got.UpdatedAt.IsZero() {
		t.Fatalf("the leader wrote the status of a held cluster (at %s): it plans from the snapshot's state", got.UpdatedAt)
	}
	// The restore hands the cluster over: its ID recorded.
	if _, err := cli.Put(ctx, idKey, fmt.Sprintf("%016x", real)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the status written once the cluster is handed over", func() (bool, string) {
		if got := status(); !got.UpdatedAt.IsZero() {
			return true, ""
		}
		clk.Advance(time.Minute)
		return false, "no status yet"
	})
	// A running restore in the slot holds it again.
	op := api.NewOperation("restore-1")
	op.Spec = api.OperationSpec{Type: api.OpRestore, Node: "cp-1", StartedBy: "nicoctl"}
	op.Status.Phase = api.OpRunning
	if err := st.Put(ctx, store.OpKey(op.Metadata.Name), op); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, store.ActiveOpKey, op.Metadata.Name); err != nil {
		t.Fatal(err)
	}
	// A pass that read the state before the hold may still write: the
	// second pass after it started after the hold.
	n0 := passes()
	testwait.For(t, 30*time.Second, "two etcd-status passes after the hold", func() (bool, string) {
		if passes() >= n0+2 {
			return true, ""
		}
		clk.Advance(time.Minute)
		return false, fmt.Sprintf("%d passes", passes()-n0)
	})
	before := status().UpdatedAt
	held("while a restore holds the slot")
	if got := status().UpdatedAt; !got.Equal(before) {
		t.Fatalf("the leader wrote the status (at %s) while a restore held the slot", got)
	}
}

// TestLeaderRecordsTheClusterID: a fleet without a record of its cluster
// gets one from its leader, so that a snapshot of it holds the
// coordinators off the cluster restored from it.
func TestLeaderRecordsTheClusterID(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Name: "a", SessionTTL: 5 * time.Second}, st, slog.New(slog.DiscardHandler))
	defer runInBackground(t, c)()
	testwait.For(t, 30*time.Second, "the cluster ID recorded", func() (bool, string) {
		resp, err := cli.Get(t.Context(), "cluster-id")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == fmt.Sprintf("%016x", resp.Header.ClusterId) {
			return true, ""
		}
		return false, fmt.Sprint(resp.Kvs)
	})
}

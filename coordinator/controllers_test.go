package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/controller/conformance"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestLeaderControllersConform runs each of the leader's controllers
// through the runtime's conformance suite, on real etcd, with a term's
// fence and a machine pool to act on.
func TestLeaderControllersConform(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	t.Cleanup(func() { cli.Close() })
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := api.NewMachinePool("web")
	pool.Spec.Count = 1
	if err := st.Create(ctx, store.PoolKey("web"), pool); err != nil {
		t.Fatal(err)
	}
	sess, err := concurrency.NewSession(st.Client(), concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	e := concurrency.NewElection(sess, store.ElectionPrefix)
	if err := e.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	fence := store.Fence{Key: e.Key(), Rev: e.Rev()}
	c := New(Config{Name: "a", ResyncInterval: time.Second, HealthTimeout: time.Second}, st, slog.New(slog.DiscardHandler))
	watched := map[string]bool{}
	for _, ctrl := range c.leaderControllers(fence) {
		for _, w := range ctrl.Watches() {
			watched[w] = true
		}
		t.Run(ctrl.Name(), func(t *testing.T) {
			conformance.Run(t, conformance.Case{Store: st, New: func(*testing.T) controller.Controller {
				for _, fresh := range c.leaderControllers(fence) {
					if fresh.Name() == ctrl.Name() {
						return fresh
					}
				}
				t.Fatalf("no controller %s", ctrl.Name())
				return nil
			}})
		})
	}
	if watched[store.LivenessKey] || watched[store.ElectionPrefix] {
		t.Errorf("a leader controller watches its own output or the election: %v", watched)
	}
}

// TestLeaderGroupHealthAndWatches: the elected candidate runs its five
// controllers, healthy; writes outside their prefixes wake none of them;
// when the candidate stops, the records stay, not running.
func TestLeaderGroupHealthAndWatches(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cd := startCandidate(t, cl, "a", 60*time.Second)
	ready := func() bool {
		hs := cd.c.Health()
		if len(hs) != len(cd.c.leaderControllers(store.Fence{})) {
			return false
		}
		// The etcd-status controller's first status is written, and the
		// two controllers that watch the object have seen every write of
		// it (the bootstrap, the status): events arrive asynchronously.
		kv, err := st.GetKV(t.Context(), store.EtcdClusterKey)
		if err != nil {
			return false
		}
		ec := &api.EtcdCluster{}
		if err := store.Decode(kv, ec); err != nil || ec.Status.UpdatedAt.IsZero() {
			return false
		}
		for _, h := range hs {
			if (h.Name == "membership" || h.Name == "etcd-status") && h.Events < uint64(kv.Version) {
				return false
			}
		}
		for _, h := range hs {
			if !h.Running || h.LastSuccess.IsZero() {
				return false
			}
		}
		return true
	}
	testwait.For(t, 20*time.Second, "the leader's controllers all succeeded", func() (bool, string) {
		return ready(), fmt.Sprintf("%+v", cd.c.Health())
	})
	if !cd.c.Healthy() {
		t.Errorf("not Healthy: %+v", cd.c.Health())
	}
	// The leader's own controllers write while the keys below are written
	// (the EtcdCluster's status, a claim, its liveness): each such write
	// may wake every controller that watches it, once, and nothing else.
	// Count from a revision that every controller's watches have
	// delivered every earlier write of: each controller starts its watches
	// at its own revision, so a write delivered late would otherwise land
	// among the events counted below.
	watches := map[string][]string{}
	for _, ctrl := range cd.c.leaderControllers(store.Fence{}) {
		watches[ctrl.Name()] = ctrl.Watches()
	}
	var startRev int64
	before := map[string]uint64{}
	testwait.For(t, 10*time.Second, "every controller to have seen every write under its prefixes", func() (bool, string) {
		startRev = 0
		latest := map[string]int64{} // prefix -> the newest write under it
		for _, ps := range watches {
			for _, p := range ps {
				if _, ok := latest[p]; ok {
					continue
				}
				resp, err := st.Client().Get(t.Context(), p, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
					clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
				if err != nil {
					return false, err.Error()
				}
				latest[p] = 0
				if len(resp.Kvs) > 0 {
					latest[p] = resp.Kvs[0].ModRevision
				}
				if rev := resp.Header.Revision; startRev == 0 || rev < startRev {
					startRev = rev // the first read's: later writes are in the window
				}
			}
		}
		hs := cd.c.Health()
		for _, h := range hs {
			for _, p := range watches[h.Name] {
				if h.WatchedTo[p] < latest[p] {
					return false, fmt.Sprintf("%s watched %s to %d, written at %d", h.Name, p, h.WatchedTo[p], latest[p])
				}
			}
		}
		for _, h := range hs {
			before[h.Name] = h.Events
		}
		return true, ""
	})
	events := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, h := range cd.c.Health() {
			out[h.Name] = h.Events
		}
		return out
	}
	ctx := t.Context()
	for _, key := range []string{store.JoinNonceKey("n"), store.TokenTombstoneKey("t"), store.GossipKeyKey, "unrelated/x"} {
		if _, err := st.Client().Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
	}
	hv := api.NewHypervisor("hv-1")
	if err := st.Put(ctx, store.HypervisorKey("hv-1"), hv); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "machine-pools to see the event for hypervisors/hv-1", func() (bool, string) {
		return events()["machine-pools"] > before["machine-pools"], fmt.Sprintf("%v -> %v", before, events())
	})
	after := events()
	// Every write since the counts were taken, the test's and the leader's
	// own (the EtcdCluster's status, a claim its controllers write): a
	// controller may see each write under its prefixes once, and nothing
	// else.
	written := windowWrites(t, st, startRev)
	prefixes := map[string][]string{}
	for _, ctrl := range cd.c.leaderControllers(store.Fence{}) {
		prefixes[ctrl.Name()] = ctrl.Watches()
	}
	for name, n := range after {
		want := before[name] + map[string]uint64{"machine-pools": 1}[name]
		var mine []string
		for _, k := range written {
			if slices.ContainsFunc(prefixes[name], func(p string) bool { return strings.HasPrefix(k, p) }) {
				mine = append(mine, k)
			}
		}
		if n < want || n > before[name]+uint64(len(mine)) {
			t.Errorf("%s saw %d events, want %d to %d (writes under its prefixes meanwhile: %v; all writes: %v): it wakes on keys it does not read", name, n-before[name], want-before[name], len(mine), mine, written)
		}
	}
	cd.stop(t)
	for _, h := range cd.c.Health() {
		if h.Running {
			t.Errorf("%s still running after the candidate stopped", h.Name)
		}
	}
	// Its controllers stopped cleanly (a candidate that does not lead runs
	// none); with no election session it no longer feeds the watchdog.
	if !cd.c.rt.Healthy() {
		t.Errorf("a stopped candidate's controllers are not healthy: %+v", cd.c.Health())
	}
	if cd.c.Healthy() {
		t.Error("a stopped candidate, with no election session, is Healthy")
	}
}

// windowWrites are the keys written (put or deleted) after revision from,
// up to the store's current revision, in order; a key written twice is
// listed twice.
func windowWrites(t *testing.T, st *store.Store, from int64) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	now, err := st.Client().Get(ctx, "revision")
	if err != nil {
		t.Fatal(err)
	}
	end := now.Header.Revision
	var keys []string
	if end <= from {
		return nil
	}
	for resp := range st.Client().Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > end {
				return keys
			}
			keys = append(keys, string(ev.Kv.Key))
			if ev.Kv.ModRevision == end {
				return keys
			}
		}
	}
	t.Fatalf("the writes after revision %d: the watch ended before revision %d", from, end)
	return nil
}

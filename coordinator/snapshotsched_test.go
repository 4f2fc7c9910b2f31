package coordinator

import (
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestScheduledSnapshotsFollowTheInjectedClock: the leader's snapshot
// controller takes one at once (none was taken yet), the next only when
// spec.snapshots.interval has passed on the coordinator's clock, keeps
// spec.snapshots.keep of them in the directory, records each in
// status.snapshots.last and exports its age; a drill report is folded
// into status.snapshots.lastVerified.
func TestScheduledSnapshotsFollowTheInjectedClock(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: dir, Interval: api.Duration(time.Hour), Keep: 2}
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	defer cli.Close()
	cst, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	c := New(Config{Name: "a", SessionTTL: 5 * time.Second, ResyncInterval: time.Minute, Clock: clk, SnapshotTempDir: t.TempDir()}, cst, slog.New(slog.DiscardHandler))
	c.Metrics = metrics.NewCoordinator(metrics.NewRegistry())
	c.Metrics.Snapshots.SetClock(clk.Now)
	defer runInBackground(t, c)()
	last := func() *api.SnapshotRecord {
		got := api.NewEtcdCluster()
		if err := st.Get(t.Context(), store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Snapshots.Last
	}
	testwait.True(t, 30*time.Second, "the first scheduled snapshot", func() bool { return last() != nil })
	// Every status write after this one keeps it (the etcd-status
	// controller rebuilds the rest of the status on each pass).
	mustLast := func() *api.SnapshotRecord {
		t.Helper()
		l := last()
		if l == nil {
			t.Fatal("status.snapshots.last vanished: a status write dropped it")
		}
		return l
	}
	first := mustLast()
	if !first.TakenAt.Equal(clk.Now()) || first.Reason != snapshot.ReasonScheduled || first.Where != dir {
		t.Fatalf("first snapshot %+v, want one taken now (%v) into %s", first, clk.Now(), dir)
	}

	// 50 minutes on: none is due yet.
	for range 5 {
		clk.Advance(10 * time.Minute)
	}
	if got := mustLast(); got.Name != first.Name {
		t.Fatalf("a snapshot was taken after 50 minutes of a 1h interval: %+v", got)
	}
	if age := testutil.ToFloat64(c.Metrics.Snapshots); age != (50 * time.Minute).Seconds() {
		t.Fatalf("nico_etcd_snapshot_age_seconds = %v, want 3000", age)
	}
	// Two more intervals: two more snapshots, of which the store keeps two.
	taken := map[string]bool{first.Name: true}
	testwait.For(t, 60*time.Second, "two more scheduled snapshots", func() (bool, string) {
		if l := mustLast(); !taken[l.Name] {
			taken[l.Name] = true
		} else {
			clk.Advance(5 * time.Minute)
		}
		return len(taken) == 3, "taken so far: " + mustLast().Name
	})
	ds, err := snapshot.NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ds.List(t.Context())
	if err != nil || len(ms) != 2 || ms[0].Name != mustLast().Name || !taken[ms[1].Name] || ms[1].Name == first.Name {
		t.Fatalf("directory holds %d snapshots (%v); want the 2 newest, the first pruned", len(ms), err)
	}

	// nicoctl snapshot verify files a drill report; the leader folds it in.
	rep := api.SnapshotVerification{Name: ms[0].Name, Where: dir, VerifiedAt: clk.Now(), OK: true, Keys: int64(ms[0].TotalKeys), Revision: ms[0].Revision, By: "test"}
	if err := st.Put(t.Context(), store.SnapshotDrillKey, api.NewSnapshotDrill(rep)); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 30*time.Second, "the drill in status.snapshots.lastVerified", func() bool {
		got := api.NewEtcdCluster()
		if err := st.Get(t.Context(), store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		v := got.Status.Snapshots.LastVerified
		return v != nil && v.Name == rep.Name && v.OK
	})
}

// TestOnDemandSnapshotResetsTheSchedule: when the scheduled snapshot is
// due and one of this cluster was taken on demand within the interval
// (nicoctl snapshot save), the leader adopts it as status.snapshots.last
// and takes none.
func TestOnDemandSnapshotResetsTheSchedule(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	ds, err := snapshot.NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := snapshot.Source{Name: cl.Members[0].Name, ClientURL: cl.Members[0].ClientURL}
	od, err := snapshot.Save(t.Context(), src, etcdclient.TLSOf(cli), ds,
		snapshot.TakeOptions{Dir: t.TempDir(), Now: func() time.Time { return t0.Add(-10 * time.Minute) }, Reason: snapshot.ReasonOnDemand})
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: dir, Interval: api.Duration(time.Hour)}
	ec.Status.Snapshots.Last = &api.SnapshotRecord{Name: "etcd-old", Where: dir, TakenAt: t0.Add(-61 * time.Minute), Reason: snapshot.ReasonScheduled}
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	ccli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	defer ccli.Close()
	cst, err := store.New(ccli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(t0)
	c := New(Config{Name: "a", SessionTTL: 5 * time.Second, ResyncInterval: time.Minute, Clock: clk, SnapshotTempDir: t.TempDir()}, cst, slog.New(slog.DiscardHandler))
	defer runInBackground(t, c)()
	testwait.For(t, 30*time.Second, "the on-demand snapshot adopted", func() (bool, string) {
		got := api.NewEtcdCluster()
		if err := st.Get(t.Context(), store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		l := got.Status.Snapshots.Last
		return l.Name == od.Name && l.Reason == snapshot.ReasonOnDemand, "last: " + l.Name
	})
	if ms, err := ds.List(t.Context()); err != nil || len(ms) != 1 {
		t.Fatalf("store holds %d snapshots (%v); want only the on-demand one", len(ms), err)
	}
}

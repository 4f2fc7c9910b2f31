package coordinator

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactEnv is a memory etcd (package memetcd), a store on it, a
// coordinator (not running) on an injected clock, a leader key's fence and
// the compaction controller of that term. The leader's key is bound to no
// lease, so the etcd shares the coordinator's clock.
type compactEnv struct {
	t   *testing.T
	cli *clientv3.Client
	st  *store.Store
	clk *clockwork.FakeClock
	c   *Coordinator
	k   *etcdCompactor
	reg *metrics.Registry
}

func newCompactEnv(t *testing.T, policy api.EtcdPolicy) *compactEnv {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	cli := memClient(t, clk)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Policy = policy
	if err := ec.Spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(t.Context(), "election/test", "c")
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Name: "c", SessionTTL: 5 * time.Second, ResyncInterval: time.Minute, Clock: clk}, st, slog.New(slog.DiscardHandler))
	reg := metrics.NewRegistry()
	c.Metrics = metrics.NewCoordinator(reg)
	return &compactEnv{t: t, cli: cli, st: st, clk: clk, c: c, reg: reg,
		k: newEtcdCompactor(c.leaderDeps(store.Fence{Key: "election/test", Rev: resp.Header.Revision}))}
}

// pass runs one reconcile at the clock's time and returns the status's
// last compaction.
func (e *compactEnv) pass() api.EtcdCompactionStatus {
	e.t.Helper()
	if err := e.k.reconcile(e.t.Context()); err != nil {
		e.t.Fatalf("reconcile at %s: %v", e.clk.Now().Format(time.TimeOnly), err)
	}
	ec := api.NewEtcdCluster()
	if err := e.st.Get(e.t.Context(), store.EtcdClusterKey, ec); err != nil {
		e.t.Fatal(err)
	}
	return ec.Status.Compaction
}

// put writes key and returns the revision it was written at.
func (e *compactEnv) put(key, value string) int64 {
	e.t.Helper()
	resp, err := e.cli.Put(e.t.Context(), key, value)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

// readable tells whether key can still be read at rev (false: compacted).
func (e *compactEnv) readable(key string, rev int64) bool {
	e.t.Helper()
	_, err := e.cli.Get(e.t.Context(), key, clientv3.WithRev(rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// TestCompactionKeepsTheRetentionWindow (memory etcd, injected clock): the
// leader compacts nothing until it has seen a revision the retention
// (spec.policy.compactionRetention, 1h) old; then it compacts to the
// newest such revision, so every revision written within the last hour
// stays readable and older ones are gone; at most once per interval (6
// minutes); never while a restore holds the one-change slot; each
// compaction in status.compaction and the metrics; a deposed leader
// compacts nothing.
func TestCompactionKeepsTheRetentionWindow(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t, api.EtcdPolicy{CompactionRetention: api.Duration(time.Hour)})
	old := e.put("k", "v0") // before the first sample
	if got := e.pass(); got.Revision != 0 {
		t.Fatalf("compacted to %d at the first pass", got.Revision)
	}
	r1 := e.put("k", "v1") // after the sample at 12:00
	e.clk.Advance(30 * time.Minute)
	if got := e.pass(); got.Revision != 0 {
		t.Fatalf("compacted to %d after 30 minutes of a 1h retention", got.Revision)
	}
	r2 := e.put("k", "v2") // after the sample at 12:30
	e.clk.Advance(29 * time.Minute)
	if got := e.pass(); got.Revision != 0 {
		t.Fatalf("compacted to %d after 59 minutes of a 1h retention", got.Revision)
	}

	// 13:00: the sample of 12:00 is an hour old.
	e.clk.Advance(time.Minute)
	first := e.pass()
	if first.Revision < old || first.Revision >= r1 || !first.CompactedAt.Equal(e.clk.Now()) || !first.RetainedSince.Equal(e.clk.Now().Add(-time.Hour)) {
		t.Fatalf("status.compaction %+v at 13:00, want a revision in [%d, %d) retained since 12:00", first, old, r1)
	}
	if e.readable("k", first.Revision-1) || !e.readable("k", r1) {
		t.Fatalf("after compacting to %d: revision %d readable %v, %d (written 12:00) readable %v; want no and yes",
			first.Revision, first.Revision-1, e.readable("k", first.Revision-1), r1, e.readable("k", r1))
	}
	if got := e.metric("nico_etcd_compacted_revision"); got != float64(first.Revision) {
		t.Errorf("nico_etcd_compacted_revision %v, want %d", got, first.Revision)
	}

	// 13:31: the sample of 12:30 is past the window; the interval (6
	// minutes) has passed.
	e.clk.Advance(31 * time.Minute)
	second := e.pass()
	if second.Revision < r1 || second.Revision >= r2 || !e.readable("k", r2) || e.readable("k", r1-1) {
		t.Fatalf("status.compaction %+v at 13:31, want a revision in [%d, %d) with %d readable", second, r1, r2, r2)
	}

	// A restore takes the slot: nothing is compacted while it runs.
	r3 := e.put("k", "v3")
	e.clk.Advance(time.Hour)
	before := e.pass() // 14:31: compacts to 13:31's sample, samples the revision after v3
	if before.Revision < second.Revision || before.Revision >= r3 {
		t.Fatalf("status.compaction %+v at 14:31, want a revision in [%d, %d)", before, second.Revision, r3)
	}
	op := api.NewOperation("restore-1")
	op.Spec = api.OperationSpec{Type: api.OpRestore, Node: "cp-1", StartedBy: "nicoctl"}
	op.Status.Phase = api.OpRunning
	putOp, err := store.PutObjectOp(op)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Txn(t.Context(), nil, putOp, clientv3.OpPut(store.ActiveOpKey, op.Metadata.Name)); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(2 * time.Hour)
	if got := e.pass(); got != before {
		t.Fatalf("compacted during a restore: %+v, was %+v", got, before)
	}
	op.Status.Phase = api.OpSucceeded
	putOp, _ = store.PutObjectOp(op)
	if _, err := e.st.Txn(t.Context(), nil, putOp, clientv3.OpDelete(store.ActiveOpKey)); err != nil {
		t.Fatal(err)
	}
	third := e.pass()
	if third.Revision < r3 || e.readable("k", r3-1) {
		t.Fatalf("after the restore: status.compaction %+v, want at or past %d (v3, written 14:31)", third, r3)
	}
	if got := e.metric("nico_etcd_compactions_total"); got != 4 {
		t.Errorf("nico_etcd_compactions_total %v, want 4", got)
	}

	// Deposed: the leader key replaced; the next due compaction is refused.
	if _, err := e.cli.Delete(t.Context(), "election/test"); err != nil {
		t.Fatal(err)
	}
	e.put("election/test", "other")
	e.put("k", "v4")
	e.clk.Advance(2 * time.Hour)
	if err := e.k.reconcile(t.Context()); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("a deposed leader's compaction pass: %v, want store.ErrNotLeader", err)
	}
	if !e.readable("k", third.Revision) {
		t.Fatalf("revision %d compacted by a deposed leader", third.Revision)
	}
}

// TestCompactionDisabled: with spec.policy.compactionDisabled the leader
// compacts nothing, however old the history grows; set back to false, it
// compacts once its first sample is a retention old.
func TestCompactionDisabled(t *testing.T) {
	t.Parallel()
	e := newCompactEnv(t, api.EtcdPolicy{CompactionDisabled: true})
	old := e.put("k", "v0")
	for range 5 {
		if got := e.pass(); got.Revision != 0 {
			t.Fatalf("compacted to %d at %s with compaction disabled", got.Revision, e.clk.Now().Format(time.TimeOnly))
		}
		e.put("k", "v")
		e.clk.Advance(time.Hour)
	}
	if !e.readable("k", old) {
		t.Fatalf("revision %d, 5 hours old, was compacted with compaction disabled", old)
	}
	ec := api.NewEtcdCluster()
	if err := e.st.Get(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	ec.Spec.Policy.CompactionDisabled = false
	if err := e.st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	e.pass()
	e.clk.Advance(time.Hour)
	if got := e.pass(); got.Revision <= old || e.readable("k", old) {
		t.Fatalf("compaction enabled again: status.compaction %+v, revision %d readable %v; want it compacted", got, old, e.readable("k", old))
	}
}

// metric is the value of the unlabelled metric name.
func (e *compactEnv) metric(name string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gatherer().Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	e.t.Fatalf("metric %s not exported", name)
	return 0
}

// TestLeaderCompactsItsEtcd: run as the elected leader's controller, on
// the coordinator's injected clock, the compaction controller compacts
// nico's etcd once the retention has passed, and the etcd-status
// controller's status writes keep status.compaction.
func TestLeaderCompactsItsEtcd(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Policy.CompactionRetention = api.Duration(10 * time.Minute)
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	first, err := cli.Put(t.Context(), "k", "v0")
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	c := New(Config{Name: "a", SessionTTL: 5 * time.Second, ResyncInterval: time.Minute, Clock: clk}, st, slog.New(slog.DiscardHandler))
	defer runInBackground(t, c)()
	compaction := func() api.EtcdCompactionStatus {
		got := api.NewEtcdCluster()
		if err := st.Get(t.Context(), store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Compaction
	}
	testwait.For(t, time.Minute, "a compaction by the leader", func() (bool, string) {
		if got := compaction(); got.Revision > first.Header.Revision {
			return true, ""
		}
		if _, err := cli.Put(t.Context(), "k", clk.Now().String()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		return false, "not yet at " + clk.Now().Format(time.TimeOnly)
	})
	got := compaction()
	if _, err := cli.Get(t.Context(), "k", clientv3.WithRev(first.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("revision %d after compacting to %d: %v, want compacted", first.Header.Revision, got.Revision, err)
	}
	// The etcd-status controller rewrites the status on its passes; the
	// compaction stays.
	for range 3 {
		clk.Advance(time.Minute)
		testwait.For(t, 30*time.Second, "the etcd-status controller's next write", func() (bool, string) {
			ec := api.NewEtcdCluster()
			if err := st.Get(t.Context(), store.EtcdClusterKey, ec); err != nil {
				t.Fatal(err)
			}
			return !ec.Status.UpdatedAt.Before(clk.Now()), "status updated at " + ec.Status.UpdatedAt.Format(time.TimeOnly)
		})
		if c := compaction(); c.Revision < got.Revision {
			t.Fatalf("status.compaction %+v after the etcd-status controller's write, was %+v", c, got)
		}
	}
}

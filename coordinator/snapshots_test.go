package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
	"github.com/homystack/nico/pkg/store"
)

// withSnapshots writes the EtcdCluster with spec.snapshots and makes the
// current leader store snapshots in mem (a real snapshot of the real
// etcd the harness's store runs on).
func (h *execHarness) withSnapshots(spec api.EtcdSnapshotsSpec, mem *snapshottest.Mem) {
	h.t.Helper()
	ec := api.NewEtcdCluster()
	if err := h.st.Get(h.t.Context(), store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		h.t.Fatal(err)
	}
	ec.Spec.Snapshots = spec
	h.put(store.EtcdClusterKey, ec)
	h.snapStore = func(string) (snapshot.Store, error) { return mem, nil }
}

func (h *execHarness) join(name string) *api.JoinRequest {
	h.t.Helper()
	j := api.NewJoinRequest(name)
	if err := h.st.Get(h.t.Context(), store.JoinKey(name), j); err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *execHarness) activeOp() string {
	h.t.Helper()
	resp, err := h.st.Client().Get(h.t.Context(), store.ActiveOpKey)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestJoinWaitsForItsSnapshot: with spec.snapshots.beforeChange Required
// (the default), a join whose snapshot fails does not start: no
// operation, no learner; the join request and status.snapshots say why.
// The next attempt waits snapshotRetryAfter; once the store answers, the
// join starts with the snapshot journaled first in its operation.
func TestJoinWaitsForItsSnapshot(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	h := newExecHarness(t, cl)
	mem := snapshottest.NewMem()
	mem.FailWith(errors.New("bucket unreachable"))
	h.withSnapshots(api.EtcdSnapshotsSpec{Destination: "s3://backup.invalid/etcd"}, mem)
	h.fileJoin("cp-3")

	step, err := h.pass()
	if err != nil || step.Action != membership.StartJoin {
		t.Fatalf("pass = %s, %v; want StartJoin, no error", step.Action, err)
	}
	if op := h.activeOp(); op != "" {
		t.Fatalf("operation %s started although its snapshot failed", op)
	}
	if n := h.mem.changed("add"); n != 0 {
		t.Fatalf("%d learners added although the snapshot failed", n)
	}
	msg := h.join("cp-3").Status.Message
	for _, want := range []string{"waits for a snapshot", "join of cp-3", "bucket unreachable", "nothing was changed", "BestEffort"} {
		if !strings.Contains(msg, want) {
			t.Errorf("join request message %q does not say %q", msg, want)
		}
	}
	if f := h.cluster().Status.Snapshots.LastFailure; !strings.Contains(f, "bucket unreachable") {
		t.Errorf("status.snapshots.lastFailure = %q", f)
	}

	// Within snapshotRetryAfter nothing is tried, even with the store back.
	mem.FailWith(nil)
	h.now = h.now.Add(time.Second)
	if _, err := h.pass(); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mem.List(t.Context()); len(ms) != 0 || h.activeOp() != "" {
		t.Fatalf("retried within snapshotRetryAfter: %d snapshots, active op %q", len(ms), h.activeOp())
	}
	if msg := h.join("cp-3").Status.Message; !strings.Contains(msg, "next try at") {
		t.Errorf("held join's message %q does not say when the next try is", msg)
	}

	h.now = h.now.Add(snapshotRetryAfter)
	if errs := h.converge("cp-3"); len(errs) != 0 {
		t.Fatalf("converge: %v", errs)
	}
	h.checkJoined("cp-3")
	ms, err := mem.List(t.Context())
	if err != nil || len(ms) != 1 || ms[0].Reason != "before-op join of cp-3" || ms[0].TotalKeys == 0 {
		t.Fatalf("stored snapshots = %+v, %v; want one taken before the join", ms, err)
	}
	op := &api.Operation{}
	if err := h.st.Get(t.Context(), store.OpKey(h.join("cp-3").Status.Operation), op); err != nil {
		t.Fatal(err)
	}
	if first := op.Status.History[0].Message; !strings.Contains(first, "snapshot "+ms[0].Name+" taken before the change") {
		t.Fatalf("the operation's journal starts with %q, want the snapshot", first)
	}
	if last := h.cluster().Status.Snapshots.Last; last == nil || last.Name != ms[0].Name {
		t.Fatalf("status.snapshots.last = %+v, want %s", last, ms[0].Name)
	}
}

// TestBestEffortSnapshotLetsTheChangeGoOn: with BestEffort the failure is
// journaled in the operation and the removal runs.
func TestBestEffortSnapshotLetsTheChangeGoOn(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	h := newExecHarness(t, cl)
	mem := snapshottest.NewMem()
	mem.FailWith(errors.New("disk full"))
	h.withSnapshots(api.EtcdSnapshotsSpec{Destination: "/mnt/share", BeforeChange: api.SnapshotBestEffort}, mem)
	h.fileRemoval("cp-0")
	if errs := h.converge(""); len(errs) != 0 {
		t.Fatalf("converge: %v", errs)
	}
	h.checkRemoved()
	r := api.NewRemoveRequest("cp-0")
	if err := h.st.Get(t.Context(), store.RemovalKey("cp-0"), r); err != nil {
		t.Fatal(err)
	}
	op := &api.Operation{}
	if err := h.st.Get(t.Context(), store.OpKey(r.Status.Operation), op); err != nil {
		t.Fatal(err)
	}
	if first := op.Status.History[0].Message; !strings.Contains(first, "failed, going on") || !strings.Contains(first, "disk full") {
		t.Fatalf("the operation's journal starts with %q, want the failed snapshot", first)
	}
}

// TestNoSnapshotsConfiguredTakesNone: without spec.snapshots the executor
// never opens a store.
func TestNoSnapshotsConfiguredTakesNone(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	h := newExecHarness(t, cl)
	h.snapStore = func(string) (snapshot.Store, error) {
		return nil, errors.New("opened a snapshot store with no spec.snapshots")
	}
	h.fileJoin("cp-3")
	if errs := h.converge("cp-3"); len(errs) != 0 {
		t.Fatalf("converge: %v", errs)
	}
	h.checkJoined("cp-3")
}

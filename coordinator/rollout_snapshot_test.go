package coordinator

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
	"github.com/homystack/nico/pkg/store"
)

// TestControlPlaneRolloutStepWaitsForItsSnapshot: a control-plane step
// whose snapshot fails writes no configuration and journals no operation,
// the rollout's message says why; a data-plane step takes no snapshot;
// once the store answers the step starts with the snapshot journaled.
func TestControlPlaneRolloutStepWaitsForItsSnapshot(t *testing.T) {
	t.Parallel()
	st, fence := leaderStore(t)
	ctx := t.Context()
	ec := api.NewEtcdCluster()
	ec.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: "/mnt/share/etcd"}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mem := snapshottest.NewMem()
	mem.FailWith(errors.New("share not mounted"))
	c := New(Config{Name: "a", SnapshotTempDir: t.TempDir(), Clock: clockAt(&now),
		SnapshotStores: func(string) (snapshot.Store, error) { return mem, nil }}, st, slog.New(slog.DiscardHandler))
	t.Cleanup(c.admin.Close)
	r := testRollouter(c, fence)

	ro := api.NewRollout("r1")
	ro.Status.Phase = api.RolloutRunning
	ro.Status.Nodes = []api.NodeProgress{{Name: "w-1"}, {Name: "cp-1", ControlPlane: true}}
	if err := st.Put(ctx, store.RolloutKey("r1"), ro); err != nil {
		t.Fatal(err)
	}
	read := func() *api.Rollout {
		got := api.NewRollout("r1")
		if err := st.Get(ctx, store.RolloutKey("r1"), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	obs := rollout.Observed{Nodes: []rollout.Node{{Name: "w-1"}, {Name: "cp-1", ControlPlane: true}}}
	configured := func(node string) bool {
		err := st.Get(ctx, store.NixosConfigKey(node), api.NewNixosConfiguration(node))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	active := func() string {
		op, err := st.ActiveOp(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if op == nil {
			return ""
		}
		return op.Metadata.Name
	}
	release := func() {
		got := read()
		op := active()
		got.Status.Operation, got.Status.Current = "", nil
		if err := st.Put(ctx, store.RolloutKey("r1"), got); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Client().Delete(ctx, store.ActiveOpKey); err != nil || op == "" {
			t.Fatalf("release %q: %v", op, err)
		}
	}

	// A data-plane step: no snapshot, the failing store is not asked.
	if err := r.apply(ctx, read(), obs, nil, rollout.Step{Action: rollout.Start, Nodes: []string{"w-1"}, Reason: "roll w-1"}, now); err != nil {
		t.Fatalf("data-plane step: %v", err)
	}
	if !configured("w-1") || active() == "" {
		t.Fatal("the data-plane step did not start")
	}
	release()

	// A control-plane step with a failing snapshot waits.
	if err := r.apply(ctx, read(), obs, nil, rollout.Step{Action: rollout.Start, Nodes: []string{"cp-1"}, Reason: "roll cp-1"}, now); err != nil {
		t.Fatalf("held step: %v", err)
	}
	if configured("cp-1") || active() != "" {
		t.Fatalf("the control-plane step started although its snapshot failed (configured %v, active %q)", configured("cp-1"), active())
	}
	if msg := read().Status.Message; !strings.Contains(msg, "waits for a snapshot") || !strings.Contains(msg, "share not mounted") || !strings.Contains(msg, "rollout r1 step 2 (cp-1)") {
		t.Fatalf("rollout message %q does not say why the step waits", msg)
	}

	mem.FailWith(nil)
	now = now.Add(snapshotRetryAfter)
	if err := r.apply(ctx, read(), obs, nil, rollout.Step{Action: rollout.Start, Nodes: []string{"cp-1"}, Reason: "roll cp-1"}, now); err != nil {
		t.Fatalf("step after the store came back: %v", err)
	}
	if !configured("cp-1") || active() == "" {
		t.Fatal("the control-plane step did not start once its snapshot was taken")
	}
	op := &api.Operation{}
	if err := st.Get(ctx, store.OpKey(active()), op); err != nil {
		t.Fatal(err)
	}
	ms, _ := mem.List(ctx)
	if len(ms) != 1 || !strings.Contains(op.Status.History[0].Message, "snapshot "+ms[0].Name+" taken before the change") {
		t.Fatalf("%d snapshots; the step's journal starts with %q", len(ms), op.Status.History[0].Message)
	}
}

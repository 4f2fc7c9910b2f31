package coordinator

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// TestRolloutNextBatchInTheSamePass (real etcd): the pass that marks a
// batch done starts the next batch too; it does not wait for another
// pass, which in the controller comes only after the watch delivered the
// rollouter's own write and the settle time passed.
func TestRolloutNextBatchInTheSamePass(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("dp-1")
	h.machine("dp-2")
	r := api.NewRollout("r1")
	r.Metadata.CreatedAt = h.now
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "v1"}
	r.Spec.Nodes = []string{"dp-1", "dp-2"}
	if err := h.st.Create(t.Context(), store.RolloutKey("r1"), r); err != nil {
		t.Fatal(err)
	}
	for range 5 { // the rollout begins, then dp-1 starts
		if err := h.ro.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if last(h.rollouts()).Node("dp-1").Phase == api.NodeApplying {
			break
		}
	}
	if ro := last(h.rollouts()); ro.Node("dp-1").Phase != api.NodeApplying || ro.Node("dp-2").Phase != api.NodePending {
		t.Fatalf("dp-1 %s, dp-2 %s; want Applying and Pending", ro.Node("dp-1").Phase, ro.Node("dp-2").Phase)
	}
	h.agents() // dp-1 applies
	if err := h.ro.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ro := last(h.rollouts()); ro.Node("dp-1").Phase != api.NodeDone || ro.Node("dp-2").Phase != api.NodeApplying {
		t.Fatalf("the pass after dp-1 applied: dp-1 %s, dp-2 %s; want Done and Applying", ro.Node("dp-1").Phase, ro.Node("dp-2").Phase)
	}
}

package coordinator

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// windowRollout registers names as machines of h and creates rollout r1
// of them, two at a time.
func windowRollout(t *testing.T, h *kcHarness, names []string) {
	t.Helper()
	for _, n := range names {
		h.machine(n)
	}
	r := api.NewRollout("r1")
	r.Metadata.CreatedAt = h.now
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "v1"}
	r.Spec.Nodes = names
	r.Spec.MaxUnavailable = "2"
	if err := h.st.Create(t.Context(), store.RolloutKey("r1"), r); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutWindowYieldsToAWaitingChange (real etcd): a data-plane step
// keeps maxUnavailable nodes applying under one operation, starting the
// next node in the write that marks one done; once another change waits
// for the slot it starts no more, releases the slot when its nodes are
// done, and starts the next step only when nothing waits.
func TestRolloutWindowYieldsToAWaitingChange(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	names := []string{"dp-1", "dp-2", "dp-3", "dp-4", "dp-5"}
	windowRollout(t, h, names)
	pass := func() *api.Rollout {
		t.Helper()
		if err := h.ro.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		return last(h.rollouts())
	}
	phases := func(ro *api.Rollout) string {
		var out []string
		for _, p := range ro.Status.Nodes {
			ph := string(p.Phase)
			if ph == "" {
				ph = "Pending"
			}
			out = append(out, p.Name+":"+ph)
		}
		return strings.Join(out, " ")
	}
	active := func() string {
		t.Helper()
		kv, err := h.st.GetKV(t.Context(), store.ActiveOpKey)
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(kv.Value)
	}
	expect := func(ro *api.Rollout, want string) {
		t.Helper()
		if got := phases(ro); got != want {
			t.Fatalf("nodes %s, want %s", got, want)
		}
	}

	ro := pass()
	for range 4 {
		if ro.Node("dp-1").Phase == api.NodeApplying {
			break
		}
		ro = pass()
	}
	expect(ro, "dp-1:Applying dp-2:Applying dp-3:Pending dp-4:Pending dp-5:Pending")
	op := active()
	if op == "" || op != ro.Status.Operation {
		t.Fatalf("active operation %q, the rollout's step %q", op, ro.Status.Operation)
	}

	// dp-1 is slow; dp-2 applies: dp-3 starts in the write that records
	// dp-2 done, under the same operation, which now names it.
	h.hold["dp-1"] = true
	h.agents()
	step, err := h.ro.once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if step.Action != rollout.MarkDone || !slices.Equal(step.Nodes, []string{"dp-2"}) || !slices.Equal(step.Extend, []string{"dp-3"}) {
		t.Fatalf("the step after dp-2 applied is %s; want MarkDone [dp-2] extending to dp-3", step)
	}
	ro = last(h.rollouts())
	expect(ro, "dp-1:Applying dp-2:Done dp-3:Applying dp-4:Pending dp-5:Pending")
	if got := active(); got != op {
		t.Fatalf("active operation %q after the step widened, want %q still", got, op)
	}
	o := &api.Operation{}
	if err := h.st.Get(t.Context(), store.OpKey(op), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(o.Spec.Node, ","); !slices.Equal(got, []string{"dp-1", "dp-3"}) {
		t.Fatalf("operation %s names nodes %v, want [dp-1 dp-3]", op, got)
	}
	if c := h.config("dp-3"); c.Spec.Revision != "v1" || c.Settled() != api.GenerationPending {
		t.Fatalf("dp-3's configuration: revision %q, %s; want v1, pending", c.Spec.Revision, c.Settled())
	}

	// A membership change waits for the slot: dp-3 applies and nothing
	// starts after it.
	h.ro.slots.set("membership", "membership: StartJoin cp-9")
	h.agents()
	ro = pass()
	expect(ro, "dp-1:Applying dp-2:Done dp-3:Done dp-4:Pending dp-5:Pending")

	// dp-1 applies: the step ends and releases the slot; the next one
	// waits.
	delete(h.hold, "dp-1")
	h.agents()
	ro = pass()
	expect(ro, "dp-1:Done dp-2:Done dp-3:Done dp-4:Pending dp-5:Pending")
	if got := active(); got != "" {
		t.Fatalf("the slot is held by %q after the step's nodes are done, want it free", got)
	}
	step, err = h.ro.once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if step.Action != rollout.Wait || !strings.Contains(step.Reason, "membership: StartJoin cp-9 waits for the one-change slot") {
		t.Fatalf("with the slot free and a change waiting, the rollout's step is %s; want to wait for the change", step)
	}
	ro = last(h.rollouts())
	expect(ro, "dp-1:Done dp-2:Done dp-3:Done dp-4:Pending dp-5:Pending")
	// The journal says what holds the rollout, written once.
	if ro.Status.Message != step.Reason {
		t.Fatalf("the rollout's message is %q while it waits, want %q", ro.Status.Message, step.Reason)
	}
	rev := ro.Metadata.Revision
	if _, err := h.ro.once(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := last(h.rollouts()).Metadata.Revision; got != rev {
		t.Fatalf("a wait for the same reason wrote the rollout again (revision %d, was %d)", got, rev)
	}

	// Nothing waits any more: the next step starts.
	h.ro.slots.set("membership", "")
	ro = pass()
	expect(ro, "dp-1:Done dp-2:Done dp-3:Done dp-4:Applying dp-5:Applying")
}

// TestRolloutStepGuardsItsObservedOperation (real etcd): a step records
// itself in the operation as its pass observed it, guarded on it being
// unchanged since; a change in between refuses the step, writes nothing,
// and the next pass, observing again, records it.
func TestRolloutStepGuardsItsObservedOperation(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	names := []string{"dp-1", "dp-2"}
	windowRollout(t, h, names)
	ctx := t.Context()
	var ro *api.Rollout
	for range 4 {
		if err := h.ro.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if ro = last(h.rollouts()); ro.Node("dp-2").Phase == api.NodeApplying {
			break
		}
	}
	opName := ro.Status.Operation
	if opName == "" || ro.Node("dp-1").Phase != api.NodeApplying || ro.Node("dp-2").Phase != api.NodeApplying {
		t.Fatalf("rollout %s: dp-1 %s, dp-2 %s, operation %q; want both applying under one", ro.Metadata.Name, ro.Node("dp-1").Phase, ro.Node("dp-2").Phase, opName)
	}
	h.agents()

	obs, active, err := h.ro.observe(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	if active == nil || active.Metadata.Name != opName {
		t.Fatalf("observed active operation %v, want %s", active, opName)
	}
	step := rollout.Plan(obs, h.now)
	if step.Action != rollout.MarkDone || !slices.Equal(step.Nodes, names) {
		t.Fatalf("the step after both applied is %s; want MarkDone [dp-1 dp-2]", step)
	}
	// The operation changes after the pass observed it.
	op := &api.Operation{}
	if err := h.st.Get(ctx, store.OpKey(opName), op); err != nil {
		t.Fatal(err)
	}
	op.Record(h.now, "someone", "a note written between the observation and the step")
	if err := h.st.Update(ctx, store.OpKey(opName), op); err != nil {
		t.Fatal(err)
	}
	if err := h.ro.apply(ctx, ro, obs, active, step, h.now); err == nil {
		t.Fatal("the step was written over an operation changed since its observation")
	}
	if got := last(h.rollouts()); got.Metadata.Revision != ro.Metadata.Revision {
		t.Fatalf("the refused step wrote the rollout (revision %d, was %d)", got.Metadata.Revision, ro.Metadata.Revision)
	}
	if err := h.st.Get(ctx, store.OpKey(opName), op); err != nil {
		t.Fatal(err)
	}
	if op.Status.Phase != api.OpRunning {
		t.Fatalf("the refused step left operation %s %s, want it running", opName, op.Status.Phase)
	}

	// The next pass observes the operation as it is and ends the step.
	if err := h.ro.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Get(ctx, store.OpKey(opName), op); err != nil {
		t.Fatal(err)
	}
	if op.Status.Phase != api.OpSucceeded {
		t.Fatalf("operation %s is %s after the next pass, want %s", opName, op.Status.Phase, api.OpSucceeded)
	}
	if !slices.ContainsFunc(op.Status.History, func(e api.Event) bool { return strings.Contains(e.Message, "a note written between") }) {
		t.Fatalf("the step's record lost the note written before it: %v", op.Status.History)
	}
}

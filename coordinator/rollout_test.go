package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// TestActiveRollout: the rollout with a step in flight goes first; then the
// oldest that has neither finished nor halted; a halted one waits for undo.
func TestActiveRollout(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	t0 := time.Unix(1000, 0)
	put := func(name string, age int, phase api.RolloutPhase, op string, undo bool) {
		r := api.NewRollout(name)
		r.Metadata.CreatedAt = t0.Add(time.Duration(age) * time.Second)
		r.Status.Phase, r.Status.Operation, r.Spec.Undo = phase, op, undo
		if err := st.Put(t.Context(), store.RolloutKey(name), r); err != nil {
			t.Fatal(err)
		}
	}
	want := func(name string) {
		t.Helper()
		r, err := activeRollout(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if r != nil {
			got = r.Metadata.Name
		}
		if got != name {
			t.Fatalf("active rollout %q, want %q", got, name)
		}
	}
	want("")
	put("a-done", 0, api.RolloutSucceeded, "", false)
	put("b-halted", 1, api.RolloutHalted, "", false)
	want("")
	put("c-new", 3, api.RolloutPending, "", false)
	put("d-newer", 4, api.RolloutPending, "", false)
	want("c-new")
	put("b-halted", 1, api.RolloutHalted, "", true) // undo asked: it is older
	want("b-halted")
	put("d-newer", 4, api.RolloutRunning, "rollout-d-newer-1", false)
	want("d-newer") // its step is in flight
}

// TestStandbyRollsLikeADataPlaneNode: a control-plane standby (no member,
// phase Standby) is not waited on as a healthy voter; a control-plane node
// with a member, or joining, is.
func TestStandbyRollsLikeADataPlaneNode(t *testing.T) {
	t.Parallel()
	cp := func(phase api.NodePhase) *api.Node {
		n := api.NewNode("cp-4")
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		n.Status.Phase = phase
		return n
	}
	w := api.NewNode("w-1")
	w.Spec.Roles = []api.Role{api.RoleWorker}
	for _, tc := range []struct {
		name   string
		n      *api.Node
		member bool
		want   bool
	}{
		{"standby", cp(api.NodeStandby), false, false},
		{"standby whose learner was just added", cp(api.NodeStandby), true, true},
		{"voter", cp(api.NodeMember), true, true},
		{"joining", cp(api.NodeJoining), false, true},
		{"worker", w, false, false},
	} {
		if got := rollsAsControlPlane(tc.n, tc.member); got != tc.want {
			t.Errorf("%s: rolls as control plane %v, want %v", tc.name, got, tc.want)
		}
	}
}

package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
)

// TestActiveRollout: the rollout with a step in flight goes first; then the
// oldest that has neither finished nor halted; a halted one waits for undo
// (asked after a pass found it settled, too).
func TestActiveRollout(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	settled := settledRollouts{}
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
		r, err := activeRollout(t.Context(), st, settled)
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

// TestSettledRolloutsAreNotReadAgain: a pass reads a finished rollout, or
// one halted with no undo asked, once; the next passes list its key and
// read its value again only once it changed.
func TestSettledRolloutsAreNotReadAgain(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ctx := t.Context()
	put := func(name string, phase api.RolloutPhase, undo bool) {
		t.Helper()
		r := api.NewRollout(name)
		r.Metadata.CreatedAt = time.Unix(1000, 0)
		r.Status.Phase, r.Spec.Undo = phase, undo
		if err := st.Put(ctx, store.RolloutKey(name), r); err != nil {
			t.Fatal(err)
		}
	}
	put("done", api.RolloutSucceeded, false)
	put("halted", api.RolloutHalted, false)
	put("next", api.RolloutPending, false)
	settled := settledRollouts{}
	active := func() (string, error) {
		r, err := activeRollout(ctx, st, settled)
		if r == nil {
			return "", err
		}
		return r.Metadata.Name, err
	}
	if got, err := active(); err != nil || got != "next" {
		t.Fatalf("first pass: %q, %v; want next", got, err)
	}
	faults := &memetcd.Faults{}
	faults.Wrap(st.Client())
	read := errors.New("a settled rollout was read again")
	for _, name := range []string{"done", "halted"} {
		faults.Add(memetcd.Fault{Kinds: memetcd.Get | memetcd.Txn, Prefix: store.RolloutKey(name), Err: read})
	}
	for range 3 {
		if got, err := active(); err != nil || got != "next" {
			t.Fatalf("later pass: %q, %v; want next, with neither settled rollout read", got, err)
		}
	}
	faults.Clear()
	put("halted", api.RolloutHalted, true) // undo asked
	for _, name := range []string{"done", "halted"} {
		faults.Add(memetcd.Fault{Kinds: memetcd.Get | memetcd.Txn, Prefix: store.RolloutKey(name), Err: read})
	}
	if _, err := active(); !errors.Is(err, read) {
		t.Fatalf("pass after an undo was asked: %v, want the changed rollout read", err)
	}
	faults.Clear()
	if got, err := active(); err != nil || got != "halted" {
		t.Fatalf("pass after an undo was asked: %q, %v; want halted (older than next)", got, err)
	}
	if err := st.Delete(ctx, store.RolloutKey("done")); err != nil {
		t.Fatal(err)
	}
	if _, err := active(); err != nil {
		t.Fatal(err)
	}
	if _, ok := settled["done"]; ok {
		t.Error("a deleted rollout is still remembered as settled")
	}
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

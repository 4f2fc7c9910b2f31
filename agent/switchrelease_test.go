package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// TestSwitchReleaseReportsOnceOnTheNewGeneration: a granted switch is
// reported done only once /run/current-system is its toplevel, the agent
// runs that generation's configuration (not stale: a restart into it
// restarts the member) and the agent is healthy; a waiting ask is never
// reported.
func TestSwitchReleaseReportsOnceOnTheNewGeneration(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	dir := t.TempDir()
	oldGen, newGen := filepath.Join(dir, "old-system"), filepath.Join(dir, "new-system")
	for _, d := range []string{oldGen, newGen} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	current := filepath.Join(dir, "current-system")
	point := func(to string) {
		t.Helper()
		_ = os.Remove(current)
		if err := os.Symlink(to, current); err != nil {
			t.Fatal(err)
		}
	}
	stale := true
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane},
		SwitchGuard: SwitchGuardConfig{CurrentSystem: current, Stale: func() bool { return stale }}}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	ctrl := a.switchRelease()
	put := func(phase api.SwitchPhase) {
		t.Helper()
		r := api.NewSwitchRequest("cp-1")
		r.Spec = api.SwitchRequestSpec{Attempt: "a1", Toplevel: newGen, Action: "switch"}
		r.Status = api.SwitchRequestStatus{Attempt: "a1", Phase: phase, Operation: "switch-cp-1-a1"}
		if err := st.Put(ctx, store.SwitchKey("cp-1"), r); err != nil {
			t.Fatal(err)
		}
	}
	reported := func() bool {
		t.Helper()
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r := &api.SwitchRequest{}
		if err := st.Get(ctx, store.SwitchKey("cp-1"), r); errors.Is(err, store.ErrNotFound) {
			return false
		} else if err != nil {
			t.Fatal(err)
		}
		return !r.Spec.SwitchedAt.IsZero()
	}
	if reported() {
		t.Fatal("reported with no request")
	}
	point(newGen)
	stale = false
	a.state.setUp(true)
	put(api.SwitchWaiting)
	if reported() {
		t.Fatal("a waiting ask reported switched")
	}
	put(api.SwitchGranted)
	a.state.setUp(false)
	point(oldGen)
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"still on the old generation", func() {}},
		{"switched, but the agent runs the old configuration", func() { point(newGen); stale = true }},
		{"the agent restarted into it, its member not yet healthy", func() { stale = false }},
	} {
		step.do()
		if reported() {
			t.Fatalf("%s: reported switched", step.what)
		}
	}
	a.state.setUp(true)
	if !reported() {
		t.Fatal("on the new generation, current and healthy: not reported")
	}
}

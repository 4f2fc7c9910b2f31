package coordinator

import (
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// TestExecutorStandbyThenGrow: with spec.voters 3 reached, a fourth
// host's join request is marked Standby and no learner is added; raising
// spec.voters to 5 makes it a voter through the learner flow.
func TestExecutorStandbyThenGrow(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	h := newExecHarness(t, cl)
	h.wantVoters = 3
	h.fileJoin("cp-3")
	if errs := h.converge("cp-3"); len(errs) > 0 {
		t.Fatal(errs)
	}
	j := api.NewJoinRequest("cp-3")
	if err := h.st.Get(t.Context(), store.JoinKey("cp-3"), j); err != nil {
		t.Fatal(err)
	}
	if !j.Status.Standby || j.Status.Phase != api.JoinPending || j.Status.Message == "" {
		t.Fatalf("join status %+v, want a pending standby with its reason", j.Status)
	}
	if n := h.mem.changed("add"); n != 0 {
		t.Fatalf("%d learners added for a standby", n)
	}
	h.wantVoters = 5
	if errs := h.converge("cp-3"); len(errs) > 0 {
		t.Fatal(errs)
	}
	h.checkJoined("cp-3")
	if got := h.voters(); !slices.Contains(got, "cp-3") {
		t.Fatalf("voters %v", got)
	}
}

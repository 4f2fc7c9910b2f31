package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// TestExecutorNudgesForAnUnstartedLearner: while the learner the leader
// added does not answer, the leader writes its nudge key, fenced, at most
// once per NudgeEvery, and a leader whose term is over writes nothing.
func TestExecutorNudgesForAnUnstartedLearner(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	h := newExecHarness(t, cl)
	h.fileJoin("cp-3")
	nudgeRev := func() int64 {
		t.Helper()
		resp, err := h.st.Client().Get(t.Context(), store.NudgeKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return 0
		}
		return resp.Kvs[0].ModRevision
	}
	// StartJoin, AddLearner: the learner exists and never starts (no agent).
	for range 2 {
		if _, err := h.pass(); err != nil {
			t.Fatal(err)
		}
	}
	step, _ := h.pass()
	if step.Action != membership.Wait || step.Nudge || nudgeRev() != 0 {
		t.Fatalf("at once: step %v nudge=%v, nudge key at %d; want a wait on the learner's serving, no nudge yet", step, step.Nudge, nudgeRev())
	}
	h.now = h.now.Add(membership.NudgeAfter)
	if step, _ = h.pass(); !step.Nudge {
		t.Fatalf("after NudgeAfter: step %v has no nudge", step)
	}
	first := nudgeRev()
	if first == 0 {
		t.Fatal("no nudge written")
	}
	h.now = h.now.Add(membership.NudgeEvery / 2)
	h.pass()
	if r := nudgeRev(); r != first {
		t.Fatalf("nudged again within NudgeEvery (revision %d, then %d)", first, r)
	}
	h.now = h.now.Add(membership.NudgeEvery)
	h.pass()
	second := nudgeRev()
	if second <= first {
		t.Fatalf("no second nudge after NudgeEvery (revision %d, then %d)", first, second)
	}
	// A leader whose term is over writes nothing.
	if _, err := h.st.Client().Delete(t.Context(), h.fence.Key); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Minute)
	h.pass()
	if r := nudgeRev(); r != second {
		t.Fatalf("a leader whose term is over nudged (revision %d, then %d)", second, r)
	}
}

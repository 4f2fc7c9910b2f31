package coordinator

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fileJoin registers node name and files its join request.
func (h *execHarness) fileJoin(name string) {
	h.register(name)
	j := api.NewJoinRequest(name)
	j.Spec = api.JoinRequestSpec{Node: name, PeerURL: memPeerURL(name), ClientURL: memClientURL(name), Attempt: 1}
	h.put(store.JoinKey(name), j)
}

// checkJoined: the join went through once, whatever failed on the way.
func (h *execHarness) checkJoined(name string) {
	h.t.Helper()
	j := api.NewJoinRequest(name)
	if err := h.st.Get(h.t.Context(), store.JoinKey(name), j); err != nil {
		h.t.Fatal(err)
	}
	if j.Status.Phase != api.JoinJoined {
		h.t.Fatalf("join %s: phase %q (%s), want Joined", name, j.Status.Phase, j.Status.Message)
	}
	h.checkOpDone(j.Status.Operation)
	if got, want := h.voters(), []string{"cp-0", "cp-1", "cp-2", name}; !slices.Equal(got, want) {
		h.t.Fatalf("voters %v, want %v", got, want)
	}
	if n := h.mem.changed("add"); n != 1 {
		h.t.Fatalf("%d learners added, want 1", n)
	}
	if n := h.mem.changed("promote"); n != 1 {
		h.t.Fatalf("%d promotions, want 1", n)
	}
}

// fileRemoval asks for node name's removal.
func (h *execHarness) fileRemoval(name string) {
	r := api.NewRemoveRequest(name)
	r.Spec.Node = name
	h.put(store.RemovalKey(name), r)
}

// checkRemoved: cp-0, the etcd leader, was removed once, after leadership
// moved away from it once.
func (h *execHarness) checkRemoved() {
	h.t.Helper()
	r := api.NewRemoveRequest("cp-0")
	if err := h.st.Get(h.t.Context(), store.RemovalKey("cp-0"), r); err != nil {
		h.t.Fatal(err)
	}
	if r.Status.Phase != api.RemoveDone {
		h.t.Fatalf("removal of cp-0: phase %q (%s), want Done", r.Status.Phase, r.Status.Message)
	}
	h.checkOpDone(r.Status.Operation)
	if got, want := h.voters(), []string{"cp-1", "cp-2"}; !slices.Equal(got, want) {
		h.t.Fatalf("voters %v, want %v", got, want)
	}
	if m, r := h.mem.changed("move"), h.mem.changed("remove"); m != 1 || r != 1 {
		h.t.Fatalf("%d leader moves and %d removals, want 1 and 1", m, r)
	}
}

// file files a scenario's request: cp-3's join ("join") or cp-0's
// removal ("remove"). It returns the joining node, "" for a removal.
func (h *execHarness) file(scenario string) string {
	if scenario == "join" {
		h.fileJoin("cp-3")
		return "cp-3"
	}
	h.fileRemoval("cp-0")
	return ""
}

// checkDone checks the scenario file started went through once: joining's
// join, or ("") cp-0's removal.
func (h *execHarness) checkDone(joining string) {
	h.t.Helper()
	if joining != "" {
		h.checkJoined(joining)
	} else {
		h.checkRemoved()
	}
}

func (h *execHarness) checkFired(want []string) {
	h.t.Helper()
	if got := h.faults.firedFaults(); !slices.Equal(got, want) {
		h.t.Fatalf("faults fired %v, want %v", got, want)
	}
}

// TestExecutorSurvivesErrorsAtEachCall: a join and the removal of the etcd
// leader each complete exactly once when any one call to the membership
// fails, before its change or after it (the change made, the answer lost):
// the failed pass returns the error and a later pass picks up from what
// the journal and the membership say.
func TestExecutorSurvivesErrorsAtEachCall(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	for _, tc := range []struct {
		scenario string
		method   string
		after    bool
	}{
		{"join", "", false},
		{"join", callObserve, false},
		{"join", callAddLearner, false},
		{"join", callAddLearner, true},
		{"join", callPromote, false},
		{"join", callPromote, true},
		{"remove", "", false},
		{"remove", callObserve, false},
		{"remove", callMoveLeader, false},
		{"remove", callMoveLeader, true},
		{"remove", callRemove, false},
		{"remove", callRemove, true},
	} {
		f := fault{method: tc.method, after: tc.after}
		name := tc.scenario + "/no fault"
		if tc.method != "" {
			name = tc.scenario + "/" + f.String()
		}
		t.Run(name, func(t *testing.T) {
			h := newExecHarness(t, cl)
			var want []string
			if tc.method != "" {
				h.faults.arm(tc.method, tc.after)
				want = []string{f.String()}
			}
			joining := h.file(tc.scenario)
			errs := h.converge(joining)
			if tc.method != "" && (len(errs) != 1 || !errors.Is(errs[0], errInjected)) {
				t.Fatalf("pass errors %v, want the one injected", errs)
			}
			if tc.method == "" && len(errs) != 0 {
				t.Fatalf("pass errors %v with nothing injected", errs)
			}
			h.checkFired(want)
			h.checkDone(joining)
		})
	}
}

// TestExecutorResumesFromTheJournal: the leader crashes right after each
// membership change and before its journal records it; the next leader,
// reading only the journal and the membership, finishes the operation
// without repeating the change, and the crashed leader's term can write
// nothing more.
func TestExecutorResumesFromTheJournal(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	for _, tc := range []struct {
		scenario string
		at       membership.Action
	}{
		{"join", membership.AddLearner},
		{"join", membership.Promote},
		{"remove", membership.TransferLeader},
		{"remove", membership.RemoveMember},
	} {
		t.Run(tc.scenario+"/"+string(tc.at), func(t *testing.T) {
			h := newExecHarness(t, cl)
			h.crashAt = tc.at
			joining := h.file(tc.scenario)
			errs := h.converge(joining)
			if !h.crashed || len(errs) != 1 || !errors.Is(errs[0], errCrash) {
				t.Fatalf("crashed %v, pass errors %v: want one crash at %s", h.crashed, errs, tc.at)
			}
			if h.c.cfg.Name == "leader-1" {
				t.Fatal("no new leader after the crash")
			}
			h.checkDone(joining)
		})
	}
}

// TestRemovalDoneDeletesTheJoinRequestAtOnce: the removal's Done and the
// deletion of the node's join request are one revision. An agent that
// sees Done wipes its member and, started again, files a new request at
// once; a deletion after Done could take that new request away.
func TestRemovalDoneDeletesTheJoinRequestAtOnce(t *testing.T) {
	t.Parallel()
	h := newExecHarness(t, etcdtest.Start(t, 1))
	j := api.NewJoinRequest("cp-2")
	j.Spec = api.JoinRequestSpec{Node: "cp-2", PeerURL: memPeerURL("cp-2"), ClientURL: memClientURL("cp-2"), Attempt: 1}
	j.Status = api.JoinRequestStatus{Phase: api.JoinJoined}
	h.put(store.JoinKey("cp-2"), j)
	h.fileRemoval("cp-2")
	if errs := h.converge(""); len(errs) > 0 {
		t.Fatalf("pass errors: %v", errs)
	}
	ctx := t.Context()
	r, err := h.st.Client().Get(ctx, store.RemovalKey("cp-2"))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("removal of cp-2: %v, %v", r, err)
	}
	done := r.Kvs[0].ModRevision
	removal := api.NewRemoveRequest("cp-2")
	if err := h.st.Get(ctx, store.RemovalKey("cp-2"), removal); err != nil || removal.Status.Phase != api.RemoveDone {
		t.Fatalf("removal of cp-2: phase %q (%v), want Done", removal.Status.Phase, err)
	}
	for rev, want := range map[int64]int64{done - 1: 1, done: 0} {
		got, err := h.st.Client().Get(ctx, store.JoinKey("cp-2"), clientv3.WithRev(rev))
		if err != nil || got.Count != want {
			t.Fatalf("cp-2's join request at revision %d (Done at %d): %d keys (%v), want %d", rev, done, got.Count, err, want)
		}
	}
}

// TestStaleTermChangesNoMembership: a leader that planned a change to
// etcd's membership or leadership in its term and acts on it after the
// term ended (paused past its session's end, then resumed) is refused
// before it reaches etcd: ErrNotLeader, and no change. The next leader
// then finishes the operation once.
func TestStaleTermChangesNoMembership(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	for _, tc := range []struct {
		scenario string
		at       membership.Action
		call     string // the memAdmin change the step makes
	}{
		{"join", membership.AddLearner, "add"},
		{"join", membership.Promote, "promote"},
		{"join", membership.AbortJoin, "remove"},
		{"remove", membership.TransferLeader, "move"},
		{"remove", membership.RemoveMember, "remove"},
	} {
		t.Run(tc.scenario+"/"+string(tc.at), func(t *testing.T) {
			h := newExecHarness(t, cl)
			joining := h.file(tc.scenario)
			// An aborted join is a learner that never starts: no agent,
			// and the learner's start timeout passes.
			abort := tc.at == membership.AbortJoin
			var obs *observation
			var step membership.Step
			for i := 0; ; i++ {
				if i == 40 {
					t.Fatalf("no %s planned in 40 passes", tc.at)
				}
				var err error
				if obs, step, err = h.plan(); err != nil {
					t.Fatal(err)
				}
				if step.Action == tc.at {
					break
				}
				if err := h.applyIn(h.fence, obs, step); err != nil {
					t.Fatalf("pass %d (%s): %v", i, step.Action, err)
				}
				h.now = h.now.Add(time.Second)
				if abort {
					h.now = h.now.Add(h.c.cfg.Policy.LearnerStartTimeout)
				} else if joining != "" {
					h.agent(joining)
				}
			}
			stale := h.fence
			h.lead("leader-2")
			before := h.mem.changed(tc.call)
			if err := h.applyIn(stale, obs, step); !isNotLeader(err) {
				t.Fatalf("%s in an ended term: %v, want ErrNotLeader", step, err)
			}
			if got := h.mem.changed(tc.call); got != before {
				t.Fatalf("%s in an ended term reached etcd: %d %s calls, were %d", step, got, tc.call, before)
			}
			if abort {
				return // the new leader aborts the join in its turn
			}
			if errs := h.converge(joining); len(errs) != 0 {
				t.Fatalf("the new leader's passes: %v", errs)
			}
			h.checkDone(joining)
		})
	}
}

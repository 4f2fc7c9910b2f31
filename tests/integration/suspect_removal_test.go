package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestNoRemovalWhileAVoterIsSuspect: with three voters, cp-2's mesh member
// is cut off and stays suspect; a removal of cp-3 filed meanwhile waits,
// the leader naming cp-2, and no operation is journaled nor member removed
// over the whole suspect window. Once cp-2 answers again cp-3 is removed.
func TestNoRemovalWhileAVoterIsSuspect(t *testing.T) {
	t.Parallel()
	f, c, cut := newSuspectFleet(t, 150, 3*time.Minute)
	cp3 := f.Start(f.AgentConfig("cp-3", false))
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")
	waitReady(t, cp3)
	testwait.For(t, 30*time.Second, "cp-3's join finished", func() (bool, string) {
		j := api.NewJoinRequest("cp-3")
		err := f.Store().Get(t.Context(), store.JoinKey("cp-3"), j)
		return err == nil && j.Status.Phase == api.JoinJoined, string(j.Status.Phase)
	})
	cli := f.Client()
	w := watchJournal(t, cli)
	cut.setCut(true)
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-2 suspect in the liveness record", func(l *api.Liveness) bool {
		return l.Status.Nodes["cp-2"].State == "suspect"
	})
	threeVoters := func(ms map[string]bool) bool { return len(ms) == 3 && votersIn(ms, "cp-1", "cp-2", "cp-3") }
	members := pollMembers(t, cli, threeVoters)
	drainSteps(c)
	f.requestRemoval("cp-3", false)

	s := waitSteps(t, c, 90*time.Second, "the leader waiting on suspect cp-2 for cp-3's removal", 25, func(s membership.Step) bool {
		return s.Action == membership.Wait && s.Op == nil && s.Request == "cp-3" && strings.Contains(s.Reason, "cp-2 is suspect")
	}, nil)
	t.Logf("the leader waits: %s", s.Reason)
	r := api.NewRemoveRequest("cp-3")
	if err := f.Store().Get(t.Context(), store.RemovalKey("cp-3"), r); err != nil || r.Status.Phase.Finished() {
		t.Fatalf("cp-3's removal request: phase %q, err %v; want it pending", r.Status.Phase, err)
	}
	members.stop(t, "while cp-2 was suspect")
	heal(f, cut)
	cp3.WaitRemoved(t, 90*time.Second, "cp-3 was not removed after cp-2 was alive again")
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")

	w.stop(t).opsOnlyAfter(t, "suspect", "cp-2 was suspect")
}

package integration

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestLeaderCrashAfterAddingLearner: the coordinator leader dies right after
// etcd accepted the learner and before the journal recorded it; the learner
// has not started. The next leader adopts the learner from the journal and
// finishes the join.
func TestLeaderCrashAfterAddingLearner(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	var once sync.Once
	crashed := make(chan struct{})
	var c1 *coord
	c1 = f.StartCoordinator("c-1", func(c *coord) {
		c.Observer.OnMembershipChanged = func(s membership.Step) {
			if s.Action == membership.AddLearner {
				once.Do(func() { c1.Cut(); close(crashed) })
			}
		}
	})
	testwait.For(t, 20*time.Second, "c-1 leads", func() (bool, string) { n := f.LeaderName(); return n == "c-1", n })
	f.StartCoordinator("c-2")

	rt := &gated{Runtime: f.NewRuntime(), open: make(chan struct{})}
	f.StartWith(f.AgentConfig("cp-2", false), rt)
	select {
	case <-crashed:
	case <-time.After(60 * time.Second):
		t.Fatal("leader never added the learner")
	}
	go c1.Stop()
	testwait.For(t, 30*time.Second, "c-2 takes over", func() (bool, string) { n := f.LeaderName(); return n == "c-2", n })
	close(rt.open)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	// The join request and the op are closed in one transaction.
	waitObj[api.JoinRequest](f, 30*time.Second, store.JoinKey("cp-2"), "join closed", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinJoined })

	ops := f.ops()
	if len(ops) != 1 {
		t.Fatalf("journal has %d ops, want the one join", len(ops))
	}
	op := ops[0]
	if op.Status.Phase != api.OpSucceeded || op.Spec.StartedBy != "c-1" {
		t.Fatalf("op %s: phase %s started by %s", op.Metadata.Name, op.Status.Phase, op.Spec.StartedBy)
	}
	var adoptedBy string
	for _, e := range op.Status.History {
		if strings.Contains(e.Message, "learner") && strings.Contains(e.Message, "added") {
			adoptedBy = e.Leader
		}
	}
	if adoptedBy != "c-2" {
		t.Fatalf("learner recorded by %q, want the new leader c-2; history %+v", adoptedBy, op.Status.History)
	}
}

// TestDeposedLeaderCannotWrite: a candidate whose session expired keeps its
// old fence; every decision it tries is refused.
func TestDeposedLeaderCannotWrite(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	fences := make(chan store.Fence, 4)
	c1 := f.StartCoordinator("c-1", func(c *coord) { c.Observer.OnLeaderElected = func(fe store.Fence) { fences <- fe } })
	old := <-fences
	c1.Crash()
	f.StartCoordinator("c-2")
	testwait.For(t, 30*time.Second, "c-2 takes over", func() (bool, string) { n := f.LeaderName(); return n == "c-2", n })

	st := f.Store()
	op, _ := store.PutOp(store.OpKey("forged"), api.NewOperation("forged"))
	if _, err := st.FencedTxn(t.Context(), old, nil, op); err == nil || !strings.Contains(err.Error(), store.ErrNotLeader.Error()) {
		t.Fatalf("deposed leader's write: %v, want ErrNotLeader", err)
	}
	if name, _ := coordinator.Leader(t.Context(), st); name != "c-2" {
		t.Fatalf("leader = %q", name)
	}
}

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// memberState is node i's state in etcd's member list, found by its peer
// URL (an unstarted member has no name yet): "absent", "learner" or
// "voter" ("" when the list cannot be read).
func (s *scenario) memberState(i int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.cli.MemberList(ctx)
	if err != nil {
		return ""
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, s.c.peerURL(i)) {
			if m.IsLearner {
				return "learner"
			}
			return "voter"
		}
	}
	return "absent"
}

// TestEtcdLeaderPartitionedDuringPromote: three voters, a candidate on
// each armed to pause before it promotes; cp-4 joins. When the leader
// paused with cp-4 a learner, the etcd leader's node is cut off (both
// ways) and, once the other voters elected a new etcd leader, the
// coordinator goes on. The promotion completes within 45 s of the release
// with the old leader still cut off (a coordinator candidate beside it
// takes over if the leader was on the cut node); healed, four voters, all
// caught up, within 120 s of the release.
func TestEtcdLeaderPartitionedDuringPromote(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "etcd leader partitioned away during a promote", 4, 3)
	c := s.c
	pause := c.pauseEnv(failpoint.CoordBeforePromote)
	c.nodes[0].coord.kill9()
	for i := range 3 {
		c.startCoordinator(i, pause...)
	}
	s.startWorkload(3, 10)
	s.waitWrites(30*time.Second, 100)
	c.startAgent(3)
	c.waitReached(failpoint.CoordBeforePromote, 90*time.Second)
	if st := s.memberState(3); st != "learner" {
		t.Fatalf("cp-4 is %q at the promote point, want a learner", st)
	}
	old := s.etcdLeaderIndex()
	s.fault(c.nodes[old].name, true)
	c.net.cut(old)
	testwait.For(t, 30*time.Second, "a new etcd leader on the connected side", func() (bool, string) {
		for i := range 3 {
			if i == old {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := s.cli.Status(ctx, c.clientURL(i))
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return true, ""
			}
		}
		return false, "none yet"
	})
	c.release(failpoint.CoordBeforePromote)
	released := time.Now()
	promoted := poll(45*time.Second, func() bool { return s.memberState(3) == "voter" })
	t.Logf("cp-4 promoted while %s was cut off: %v (%s after the release)", c.nodes[old].name, promoted, time.Since(released).Round(time.Millisecond))
	if !promoted {
		s.logJournal(api.OpJoin)
		t.Errorf("cp-4 not promoted within 45 s with the old etcd leader %s cut off", c.nodes[old].name)
	}
	c.net.heal()
	c.waitVoters(s.cli, 120*time.Second-time.Since(released), "cp-1", "cp-2", "cp-3", "cp-4")
	s.waitCaughtUp(60 * time.Second)
	took := time.Since(released)
	s.fault(c.nodes[old].name, false)
	s.waitWrites(30*time.Second, 50)
	s.finish(took)
}

// TestLearnerCutOffUntilStartTimeout: the learner start timeout is 15 s;
// cp-4's agent pauses once it was added as a learner, its node is cut off
// (both ways), and the agent starts its member. The coordinator aborts the
// join within 60 s (the learner removed, never promoted); healed, cp-4
// joins anew: four voters within 120 s of the heal.
func TestLearnerCutOffUntilStartTimeout(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "a learner cut off until the start timeout, then healed", 4, 3, func(c *cluster) {
		c.coordArgs = []string{"--coordinator.learnerStartTimeout", "15s"}
	})
	c := s.c
	s.startWorkload(3, 11)
	c.startAgent(3, c.pauseEnv(failpoint.AgentBeforeLearnerStart)...)
	c.waitReached(failpoint.AgentBeforeLearnerStart, 90*time.Second)
	if st := s.memberState(3); st != "learner" {
		t.Fatalf("cp-4 is %q at its learner start point, want a learner", st)
	}
	c.net.cut(3)
	cut := time.Now()
	c.release(failpoint.AgentBeforeLearnerStart)
	testwait.For(t, 60*time.Second, "cp-4's learner removed", func() (bool, string) {
		st := s.memberState(3)
		if st == "voter" {
			t.Fatalf("cp-4 was promoted while cut off")
		}
		return st == "absent", fmt.Sprintf("cp-4 %q", st)
	})
	t.Logf("the learner was removed %s after the cut", time.Since(cut).Round(time.Millisecond))
	if !s.joinAborted("cp-4", "within 15s") {
		s.logJournal(api.OpJoin)
		t.Errorf("no failed join of cp-4 journals the start timeout")
	}
	c.net.heal()
	healed := time.Now()
	c.waitVoters(s.cli, 120*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	s.waitCaughtUp(60 * time.Second)
	s.finish(time.Since(healed))
}

// joinAborted tells whether a join operation of node failed with a
// journal message containing why.
func (s *scenario) joinAborted(node, why string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops, _, err := store.List[api.Operation](ctx, s.st, store.OpsDir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, op := range ops {
		if op.Spec.Type != api.OpJoin || op.Spec.Node != node || op.Status.Phase != api.OpFailed {
			continue
		}
		for _, e := range op.Status.History {
			if strings.Contains(e.Message, why) {
				return true
			}
		}
	}
	return false
}

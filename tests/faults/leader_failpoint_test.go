package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// armedLeader makes c-cp-2, armed with point, the coordinator leader with
// c-cp-3 campaigning behind it: c-cp-2 campaigns before c-cp-3, so it
// leads once c-cp-1 is killed.
func (s *scenario) armedLeader(point string) {
	s.t.Helper()
	c := s.c
	c.startCoordinator(1, failpoint.Env+"="+point)
	testwait.For(s.t, 30*time.Second, "c-cp-2 campaigning", func() (bool, string) {
		n, err := s.st.Names(s.t.Context(), "election/")
		return err == nil && len(n) >= 2, fmt.Sprint(n)
	})
	c.startCoordinator(2)
	s.waitLeader(10*time.Second, "c-cp-1")
	c.nodes[0].coord.kill9()
	s.waitLeader(30*time.Second, "c-cp-2")
}

// waitFailpoint waits until p exits at its armed failpoint and returns
// when it did.
func (s *scenario) waitFailpoint(p *proc, point string, within time.Duration) time.Time {
	s.t.Helper()
	testwait.True(s.t, within, p.name+" to exit at "+point, func() bool { ok, _ := p.exited(); return ok })
	at := time.Now()
	if _, code := p.exited(); code != failpoint.ExitCode {
		s.t.Fatalf("%s exited %d, want %d (the failpoint)", p.name, code, failpoint.ExitCode)
	}
	return at
}

// removalFailpointRun: four voters with a candidate on three nodes; the
// leader (c-cp-2, armed with point) dies at point while it removes cp-4.
// The next leader (c-cp-3) finishes the removal: three voters and the
// request Done within 90 s of the crash.
// reached is set false when the point was not reached (the run skips).
func removalFailpointRun(t *testing.T, point string, reached *bool) {
	s := newScenario(t, "coordinator leader killed at "+point+" during a removal", 4, 4)
	s.armedLeader(point)
	s.startWorkload(3, 7)
	s.waitWrites(30*time.Second, 50)
	if _, err := requests.RequestRemoval(t.Context(), s.st, "cp-4", false, "faults test"); err != nil {
		t.Fatal(err)
	}
	removalDone := func() bool {
		r := &api.RemoveRequest{}
		return s.st.Get(t.Context(), store.RemovalKey("cp-4"), r) == nil && r.Status.Phase == api.RemoveDone
	}
	testwait.True(t, 60*time.Second, "c-cp-2 to exit at "+point, func() bool {
		ok, _ := s.c.nodes[1].coord.exited()
		return ok || removalDone()
	})
	if ok, _ := s.c.nodes[1].coord.exited(); !ok {
		// MemberRemove sent to the removed member's own endpoint can
		// answer "server stopped" though it committed; etcdadmin.Remove
		// asks again, so the point is passed all the same.
		*reached = false
		return
	}
	crashed := s.waitFailpoint(s.c.nodes[1].coord, point, time.Second)
	s.c.waitVoters(s.cli, 90*time.Second, "cp-1", "cp-2", "cp-3")
	testwait.For(t, 90*time.Second-time.Since(crashed), "cp-4's removal Done", func() (bool, string) {
		r := &api.RemoveRequest{}
		if err := s.st.Get(t.Context(), store.RemovalKey("cp-4"), r); err != nil {
			return false, err.Error()
		}
		return r.Status.Phase == api.RemoveDone, string(r.Status.Phase) + " " + r.Status.Message
	})
	took := time.Since(crashed)
	s.waitCaughtUp(60 * time.Second)
	s.finish(took)
}

// TestRemovalLeaderKilledAtEveryFailpoint: the coordinator leader dies at
// each named point of a removal; the next leader finishes it.
func TestRemovalLeaderKilledAtEveryFailpoint(t *testing.T) {
	requireE2E(t)
	for _, p := range []string{failpoint.CoordAfterJournalRemoval, failpoint.CoordBeforeMemberRemove, failpoint.CoordAfterMemberRemove} {
		t.Run(p, func(t *testing.T) {
			reached := true
			removalFailpointRun(t, p, &reached)
			if !reached {
				t.Errorf("the removal finished without reaching %s", p)
			}
		})
	}
}

// rolloutFailpointRun: three voters applying generations, a candidate on
// each; the leader (c-cp-2, armed with point) dies at point when it
// starts the first step of a rollout of v1. The next leader finishes it:
// Succeeded within 120 s of the crash, every node applied v1 exactly
// once. Then a rollout whose generation fails its health check on one
// node halts there and is not rolled on.
func rolloutFailpointRun(t *testing.T, point string) {
	s := newScenario(t, "coordinator leader killed at "+point+" of a rollout step", 3, 3, (*cluster).withGenerations)
	s.armedLeader(point)
	s.startWorkload(3, 8)
	s.startRollout("r1", "v1")
	crashed := s.waitFailpoint(s.c.nodes[1].coord, point, 60*time.Second)
	s.waitRollout("r1", 120*time.Second, api.RolloutSucceeded)
	took := time.Since(crashed)
	s.checkAppliedOnce("v1")
	s.badRollout("r2")
	s.finish(took)
}

// checkAppliedOnce records a breach unless every node applied revision
// exactly once.
func (s *scenario) checkAppliedOnce(revision string) {
	order := s.c.applied(revision)
	s.t.Logf("%s applied by %v", revision, order)
	got := slices.Sorted(slices.Values(order))
	var want []string
	for _, n := range s.c.nodes {
		want = append(want, n.name)
	}
	if !slices.Equal(got, want) {
		s.w.breach("%s applied by %v, want each of %v once", revision, got, want)
	}
}

// badRollout files rollout name of a generation whose health check fails
// on the first node it rolls to (the etcd follower first by name; the
// leader rolls last), waits until it halts there (within 90 s) and
// records a breach if that generation was rolled on to another node.
func (s *scenario) badRollout(name string) {
	s.t.Helper()
	bad := s.c.nodes[s.firstFollower()].name
	s.startRollout(name, "bad-"+bad)
	r := s.waitRollout(name, 90*time.Second, api.RolloutHalted, api.RolloutSucceeded)
	if r.Status.Phase != api.RolloutHalted || r.Status.HaltedNode != bad {
		s.w.breach("rollout %s of bad-%s: phase %s, halted at %q (%s)", name, bad, r.Status.Phase, r.Status.HaltedNode, r.Status.HaltedReason)
	}
	s.t.Logf("rollout %s: %s at %s (%s); bad-%s applied by %v", name, r.Status.Phase, r.Status.HaltedNode, r.Status.HaltedReason, bad, s.c.applied("bad-"+bad))
	for _, b := range s.c.notRolledOn(bad) {
		s.w.breach("%s", b)
	}
}

// firstFollower is the lowest index of a node whose member answers as an
// etcd follower.
func (s *scenario) firstFollower() int {
	s.t.Helper()
	idx := -1
	testwait.For(s.t, 20*time.Second, "an etcd follower", func() (bool, string) {
		for i := range s.c.nodes {
			ctx, cancel := context.WithTimeout(s.t.Context(), time.Second)
			st, err := s.cli.Status(ctx, s.c.clientURL(i))
			cancel()
			if err == nil && st.Leader != 0 && st.Leader != st.Header.MemberId {
				idx = i
				return true, ""
			}
		}
		return false, "no member answers as a follower"
	})
	return idx
}

// TestRolloutLeaderKilledAtEveryFailpoint: the coordinator leader dies
// before and after the transaction that starts a rollout step; the next
// leader finishes the rollout.
func TestRolloutLeaderKilledAtEveryFailpoint(t *testing.T) {
	requireE2E(t)
	for _, p := range []string{failpoint.CoordBeforeRolloutStep, failpoint.CoordAfterRolloutStep} {
		t.Run(p, func(t *testing.T) { rolloutFailpointRun(t, p) })
	}
}

// TestAgentKilledBeforeSwitch: cp-2's agent, armed at the point before it
// switches a generation, exits there during a rollout of v1; restarted,
// it applies v1 and the rollout succeeds within 120 s of the crash, every
// node having applied v1 once.
func TestAgentKilledBeforeSwitch(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "agent killed before it switches a generation", 3, 3, (*cluster).withGenerations)
	c := s.c
	c.killAgent(1)
	c.startAgent(1, failpoint.Env+"="+failpoint.AgentBeforeSwitch)
	c.waitVoters(s.cli, 60*time.Second, "cp-1", "cp-2", "cp-3")
	s.waitCaughtUp(60 * time.Second)
	s.startWorkload(3, 9)
	s.startRollout("r1", "v1")
	s.fault("cp-2", true)
	crashed := s.waitFailpoint(c.nodes[1].agent, failpoint.AgentBeforeSwitch, 90*time.Second)
	c.killAgent(1)
	c.startAgent(1)
	s.waitRollout("r1", 120*time.Second, api.RolloutSucceeded)
	took := time.Since(crashed)
	s.fault("cp-2", false)
	s.checkAppliedOnce("v1")
	s.finish(took)
}

package faults

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/testwait"
)

// TestRemovedAgentDiesThenComesBack: cp-4 joins with its agent armed at
// the removal failpoint; its removal is requested: the member goes, the
// agent exits at the point (before it wipes its data), and, started
// again, it finds itself removed and joins anew: four voters again within
// 120 s.
func TestRemovedAgentDiesThenComesBack(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "agent killed at its removal failpoint, then restarted (rejoins)", 4, 3)
	c := s.c
	c.startAgent(3, failpoint.Env+"="+failpoint.AgentRemoved)
	c.waitVoters(s.cli, 90*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	s.startWorkload(3, 6)
	if _, err := requests.RequestRemoval(t.Context(), s.st, "cp-4", false, "faults test"); err != nil {
		t.Fatal(err)
	}
	c.waitVoters(s.cli, 90*time.Second, "cp-1", "cp-2", "cp-3")
	testwait.True(t, 60*time.Second, "cp-4's agent to exit at its failpoint", func() bool { ok, _ := c.nodes[3].agent.exited(); return ok })
	if _, code := c.nodes[3].agent.exited(); code != failpoint.ExitCode {
		t.Fatalf("cp-4's agent exited %d, want %d (the failpoint)", code, failpoint.ExitCode)
	}
	c.killAgent(3) // its etcd child, if it still runs
	back := time.Now()
	c.startAgent(3)
	c.waitVoters(s.cli, 120*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	s.waitCaughtUp(60 * time.Second)
	s.finish(time.Since(back))
}

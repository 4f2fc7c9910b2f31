package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/testwait"
)

// joinFailpointRun: three voters with a candidate on each; the leader
// (c-cp-2, armed with point) dies at point while it adds cp-4. The next
// leader (c-cp-3) finishes the join: four voters, within 90 s of the
// crash, the invariants hold and the clients' history is linearizable.
func joinFailpointRun(t *testing.T, point string, rt etcdRuntime) {
	s := newScenario(t, "coordinator leader killed at "+point+" during a join"+rt.label, 4, 3, rt.opt)
	c := s.c
	// c-cp-2 campaigns before c-cp-3, so it leads once c-cp-1 goes.
	c.startCoordinator(1, failpoint.Env+"="+point)
	testwait.For(t, 30*time.Second, "c-cp-2 campaigning", func() (bool, string) {
		n, err := s.st.Names(t.Context(), "election/")
		return err == nil && len(n) >= 2, fmt.Sprint(n)
	})
	c.startCoordinator(2)
	s.waitLeader(10*time.Second, "c-cp-1")
	c.nodes[0].coord.kill9()
	s.waitLeader(30*time.Second, "c-cp-2")

	s.startWorkload(3, 1)
	c.startAgent(3)
	testwait.True(t, 60*time.Second, "c-cp-2 to exit at "+point, func() bool { ok, _ := c.nodes[1].coord.exited(); return ok })
	crashed := time.Now()
	if _, code := c.nodes[1].coord.exited(); code != failpoint.ExitCode {
		t.Fatalf("c-cp-2 exited %d, want %d (the failpoint)", code, failpoint.ExitCode)
	}
	c.waitVoters(s.cli, 90*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	s.finish(time.Since(crashed))
}

// TestJoinLeaderKilledAfterMemberAdd is the smoke run of the join
// failpoints: the leader dies right after etcd accepted the learner.
func TestJoinLeaderKilledAfterMemberAdd(t *testing.T) {
	joinFailpointRun(t, failpoint.CoordAfterMemberAdd, runtimes[0])
}

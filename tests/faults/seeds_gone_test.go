package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestRestartAfterSeedsGone: four voters; cp-4 was started with cp-1 as
// its only gossip seed, join endpoint and etcd endpoint. cp-1 is removed
// (a candidate on cp-2 takes over) and everything on it killed; then
// cp-4's agent and etcd are killed and the agent started again with the
// same flags, every address it was given now gone. Within 90 s it serves
// again as the same voter (same member ID), its heartbeat is in the store
// and it has caught up; nothing else changes.
func TestRestartAfterSeedsGone(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "a node restarted after every seed it knows is gone", 4, 4)
	c := s.c
	c.startCoordinator(1)
	s.startWorkload(3, 16)
	s.waitWrites(30*time.Second, 100)
	if _, err := requests.RequestRemoval(t.Context(), s.st, "cp-1", false, "faults test"); err != nil {
		t.Fatal(err)
	}
	c.waitVoters(s.cli, 90*time.Second, "cp-2", "cp-3", "cp-4")
	c.nodes[0].coord.kill9()
	c.killAgent(0)
	s.waitLeader(30*time.Second, "c-cp-2")
	s.waitCaughtUp(60 * time.Second)
	oldID, _ := s.memberID(3)
	s.fault("cp-4", true)
	c.killAgent(3)
	rev := s.revision()
	restarted := time.Now()
	c.startAgent(3)
	testwait.For(t, 90*time.Second, "cp-4 serving as the same voter with a heartbeat", func() (bool, string) {
		id, _ := s.memberID(3)
		if id != 0 && id != oldID {
			t.Fatalf("cp-4 is member %x now, was %x: it joined anew", id, oldID)
		}
		kv, err := s.st.GetKV(t.Context(), store.HeartbeatKey("cp-4"))
		if err != nil {
			return false, "heartbeat: " + err.Error()
		}
		if kv.CreateRevision <= rev {
			return false, "no heartbeat since the restart"
		}
		ok, _ := c.nodes[3].agent.exited()
		return !ok && strings.Contains(tail(c.nodes[3].agent.log, 200), "node ready"), "agent not ready"
	})
	s.waitCaughtUp(60 * time.Second)
	took := time.Since(restarted)
	s.fault("cp-4", false)
	c.waitVoters(s.cli, 10*time.Second, "cp-2", "cp-3", "cp-4")
	s.waitWrites(30*time.Second, 50)
	s.finish(took)
}

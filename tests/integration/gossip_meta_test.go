package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestGossipMetadataFollowsGenerations: once ready, a worker publishes the
// generation it applied in its gossip metadata, and another member of the
// mesh sees each new one; its health digest is published with it.
func TestGossipMetadataFollowsGenerations(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()}
	m1 := f.startMesh("cp-1", 171)
	cfg := rf.AgentConfig("cp-1", true)
	cfg.Gossip = m1
	rf.Start(cfg)
	rf.WaitVoters(30*time.Second, "cp-1")
	rf.StartCoordinator("c-1")

	mw := f.startMesh("w-1", 172, m1.Addr())
	wcfg := rf.AgentConfig("w-1", false)
	wcfg.Roles = []api.Role{api.RoleWorker}
	wcfg.Applier = rf.applier("w-1")
	wcfg.Gossip = mw
	n := rf.Start(wcfg)
	testwait.For(t, 30*time.Second, "w-1 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })

	seen := func(what string, cond func(gossip.Meta) bool) {
		t.Helper()
		testwait.For(t, 30*time.Second, what, func() (bool, string) {
			s, ok := m1.Node("w-1")
			return ok && s.State == gossip.Alive && cond(s.Meta), fmt.Sprintf("cp-1 sees w-1 %s %+v", s.State, s.Meta)
		})
	}
	seen("w-1 healthy in cp-1's view", func(m gossip.Meta) bool { return m.Health.Has(gossip.HealthOK) && m.Generation == "" })

	for i, rev := range []string{"v1", "v2"} {
		name := fmt.Sprintf("r%d", i+1)
		rf.startRollout(name, rev, func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
		rf.waitRollout(name, 60*time.Second, name+" succeeded", phaseIs(api.RolloutSucceeded))
		c := &api.NixosConfiguration{}
		if err := rf.Store().Get(t.Context(), store.NixosConfigKey("w-1"), c); err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatInt(c.Status.AppliedGeneration, 10)
		seen("generation "+want+" ("+rev+") in cp-1's view of w-1", func(m gossip.Meta) bool {
			return m.Generation == want && m.Health.Has(gossip.HealthOK)
		})
	}
}

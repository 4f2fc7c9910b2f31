package integration

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestVoterWhoseOnlySeedWasRemovedRejoinsTheMesh is the reported scenario
// end to end: four voters and the coordinator joined the mesh through the
// bootstrap host cp-1 alone; cp-1 is stopped and removed from the cluster.
// cp-2 is then killed (its mesh member gone without a leave, its agent
// stopped) and started again with only cp-1 as its seed. Its member is a
// voter again at once, and its mesh member, whose seed answers no more,
// rejoins through the gossip addresses the store's node records publish:
// the coordinator's mesh sees it alive and the liveness record has it
// alive through gossip, not only through etcd.
func TestVoterWhoseOnlySeedWasRemovedRejoinsTheMesh(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	m1 := f.startMesh("cp-1", 101)
	seed := m1.Addr()
	cfg1 := f.AgentConfig("cp-1", true)
	cfg1.Gossip = m1
	cp1 := f.Start(cfg1)
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(5) // every host a voter: four of them
	f.Gossip = f.startMesh("coord-1", 100, seed)
	f.StartCoordinator("coord-1")
	meshes := map[string]*gossip.Mesh{}
	ips := map[string]int{}
	for i, name := range []string{"cp-2", "cp-3", "cp-4"} {
		meshes[name] = f.startMesh(name, 102+i, seed)
		ips[name] = 102 + i
		c := f.AgentConfig(name, false)
		c.Gossip = meshes[name]
		f.Start(c)
	}
	f.WaitVoters(120*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	aliveThroughGossip := func(names ...string) func(*api.Liveness) bool {
		return func(l *api.Liveness) bool {
			for _, n := range names {
				if s := l.Status.Nodes[n]; s.State != "alive" || s.Reason != "gossip" {
					return false
				}
			}
			return true
		}
	}
	waitObj(f, 30*time.Second, store.LivenessKey, "every voter alive through gossip", aliveThroughGossip("cp-2", "cp-3", "cp-4"))

	// The bootstrap host goes: its agent and mesh member stop, and it is
	// removed from the cluster.
	if err := cp1.Stop(); err != nil {
		t.Fatal(err)
	}
	_ = m1.Leave(time.Second)
	_ = m1.Shutdown()
	f.requestRemoval("cp-1", false)
	waitObj(f, 90*time.Second, store.RemovalKey("cp-1"), "cp-1's removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
	f.WaitVoters(60*time.Second, "cp-2", "cp-3", "cp-4")

	// cp-2 is killed: its mesh member vanishes without a leave, its agent
	// and member stop.
	cp2 := f.Node("cp-2")
	_, port, _ := net.SplitHostPort(meshes["cp-2"].Addr())
	_ = meshes["cp-2"].Shutdown()
	if err := cp2.Stop(); err != nil {
		t.Fatal(err)
	}
	coordMesh := f.Gossip.(*gossip.Mesh)
	testwait.For(t, 30*time.Second, "cp-2 dead in the coordinator's mesh", func() (bool, string) {
		s, _ := coordMesh.Node("cp-2")
		return s.State == gossip.Dead, fmt.Sprintf("%+v", s)
	})

	// Started again, on its gossip port, with only the removed seed.
	p, _ := strconv.Atoi(port)
	m2 := f.startMeshOn("cp-2", ips["cp-2"], p, seed)
	cfg2 := cp2.Cfg
	cfg2.Gossip = m2
	restarted := time.Now()
	n2 := f.Start(cfg2)
	waitReady(t, n2)
	t.Logf("cp-2's agent ready %s after the restart", time.Since(restarted).Round(time.Millisecond))
	testwait.For(t, 30*time.Second, "cp-2 back in the mesh (the coordinator's member and cp-2's see each other alive)", func() (bool, string) {
		s, _ := coordMesh.Node("cp-2")
		c, _ := m2.Node("coord-1")
		return s.State == gossip.Alive && c.State == gossip.Alive, fmt.Sprintf("coordinator sees cp-2 %+v; cp-2 sees coord-1 %+v", s, c)
	})
	t.Logf("cp-2 back in the mesh %s after the restart", time.Since(restarted).Round(time.Millisecond))
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-2 alive through gossip in the liveness record", aliveThroughGossip("cp-2", "cp-3", "cp-4"))
	n := api.NewNode("cp-2")
	if err := f.Store().Get(t.Context(), store.NodeKey("cp-2"), n); err != nil || n.Status.GossipAddr != m2.Addr() {
		t.Fatalf("cp-2's node record publishes gossip address %q (err %v), want %s", n.Status.GossipAddr, err, m2.Addr())
	}
}

// TestVoterCutOffFromTheMeshIsAliveWhileItServes: a voter's mesh member is
// cut off until memberlist declares it dead, while its etcd member answers
// and its heartbeat lease is live. The liveness record keeps it alive
// (etcd's signals win over gossip's dead), so the leader counts it healthy:
// a join filed meanwhile completes without waiting on it, and no step names
// it unhealthy. Once it is back in the mesh it is alive through gossip.
func TestVoterCutOffFromTheMeshIsAliveWhileItServes(t *testing.T) {
	t.Parallel()
	f, c, cut := newSuspectFleet(t, 160, 5*time.Second)
	cut.setCut(true)
	coordMesh := f.Gossip.(*gossip.Mesh)
	testwait.For(t, 60*time.Second, "cp-2 dead in the coordinator's mesh", func() (bool, string) {
		s, _ := coordMesh.Node("cp-2")
		return s.State == gossip.Dead, fmt.Sprintf("%+v", s)
	})
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-2 alive through etcd in the liveness record", func(l *api.Liveness) bool {
		n := l.Status.Nodes["cp-2"]
		return n.State == "alive" && n.Reason == "etcd member answers, lease live; gossip dead"
	})
	drainSteps(c)
	cp3 := f.Start(f.AgentConfig("cp-3", false))
	unhealthy := func(s membership.Step) bool {
		return strings.Contains(s.Reason, "cp-2 is unhealthy") || strings.Contains(s.Reason, "cp-2 is suspect")
	}
	done := func(s membership.Step) bool {
		return s.Op != nil && s.Request == "cp-3" && s.Action == membership.Promote
	}
	waitSteps(t, c, 90*time.Second, "cp-3 promoted while cp-2 is out of the mesh", 1, done, unhealthy)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2", "cp-3")
	waitReady(t, cp3)
	if s, _ := coordMesh.Node("cp-2"); s.State != gossip.Dead {
		t.Fatalf("cp-2 is %s in the coordinator's mesh: the join was to complete while it was out", s.State)
	}
	heal(f, cut)
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-2 alive through gossip again", func(l *api.Liveness) bool {
		n := l.Status.Nodes["cp-2"]
		return n.State == "alive" && n.Reason == "gossip"
	})
}

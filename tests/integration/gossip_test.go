package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// meshIPs holds which test runs mesh members on each 127.0.0.<ip>. The
// tests' meshes share one token: were tests to run side by side
// (t.Parallel), a port that one test's member left, taken by another
// test's member on the same address, would be reached by the first test's
// mesh (which still remembers it) and join the two meshes. So each test
// keeps to loopback addresses of its own:
//
//	60-63   TestSelfJoinFromOneSeed
//	70-72   TestNoMembershipChangeWhileAVoterIsSuspect
//	81-83   TestRecoverThroughAgents
//	100-104 TestVoterWhoseOnlySeedWasRemovedRejoinsTheMesh
//	120-124 TestDeadVMVoterIsReplaced
//	130-134 TestClusterControlPlaneVMReplaced
//	140-142 TestNoPromotionWhileAVoterIsSuspect
//	150-152 TestNoRemovalWhileAVoterIsSuspect
//	160-162 TestVoterCutOffFromTheMeshIsAliveWhileItServes
//	171-172 TestGossipMetadataFollowsGenerations
//	181-184 TestGossipSecretRotation
//	191-192 TestAgentLockedOutOfTheMeshComesBackThroughItsEndpointsCache
var meshIPs sync.Map // int -> test name

// meshIP is 127.0.0.<ip>, which t claims for its mesh members; it fails t
// if another test has claimed it.
func meshIP(t testing.TB, ip int) string {
	t.Helper()
	if prev, taken := meshIPs.LoadOrStore(ip, t.Name()); taken && prev != t.Name() {
		t.Fatalf("127.0.0.%d holds %s's mesh members: give each test loopback addresses of its own", ip, prev)
	}
	return fmt.Sprintf("127.0.0.%d", ip)
}

// startMesh runs a mesh member on 127.0.0.<ip> (meshIP) with the fast
// profile.
func (f *fleet) startMesh(name string, ip int, seeds ...string) *gossip.Mesh {
	f.t.Helper()
	return f.startMeshOn(name, ip, 0, seeds...)
}

// startMeshOn is startMesh on port (0: any free one).
func (f *fleet) startMeshOn(name string, ip, port int, seeds ...string) *gossip.Mesh {
	f.t.Helper()
	m, err := gossip.New(gossip.Config{Name: name, BindAddr: meshIP(f.t, ip), BindPort: port, Profile: gossip.ProfileFast,
		Token: []byte("integration-token"), Seeds: seeds, Logger: f.Log.With("mesh", name), Tune: lanProbes})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
	return m
}

// TestSelfJoinFromOneSeed: agents with no etcd endpoint, only a gossip
// seed, learn the voters' client URLs from the mesh and join through
// learners; a key rotation reaches every agent without a restart. A node
// whose mesh member crashed while its agent and member run is seen dead by
// the coordinator's mesh, but nicoctl's liveness record keeps it alive
// (its member answers, its lease is live); once its agent stops too, the
// record says dead.
func TestSelfJoinFromOneSeed(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	m1 := f.startMesh("cp-1", 61)
	seed := m1.Addr()
	cfg := f.AgentConfig("cp-1", true)
	cfg.Gossip = m1
	f.Start(cfg)
	f.WaitVoters(30*time.Second, "cp-1")
	f.Gossip = f.startMesh("coord-1", 60, seed)
	f.StartCoordinator("coord-1")

	var meshes []*gossip.Mesh
	var agents []*node
	for i, name := range []string{"cp-2", "cp-3"} {
		m := f.startMesh(name, 62+i, seed)
		meshes = append(meshes, m)
		c := f.AgentConfig(name, false)
		c.Endpoints, c.Gossip = nil, m
		agents = append(agents, f.Start(c))
	}
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")

	// nicoctl gossip rotate-key: every agent follows without a restart,
	// and the mesh holds together meanwhile.
	if _, err := gossipkey.Rotate(context.Background(), f.Store(), "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "agents on key generation 1", func() (bool, string) {
		for _, m := range []*gossip.Mesh{m1, meshes[0], meshes[1]} {
			if g := m.KeyGeneration(); g != 1 {
				return false, fmt.Sprintf("a member is at generation %d", g)
			}
		}
		return true, ""
	})

	// A crash of cp-3's mesh member (no leave): the coordinator's mesh
	// sees it dead, yet its member answers and its lease is live.
	_ = meshes[1].Shutdown()
	testwait.For(t, 30*time.Second, "cp-3 dead in the coordinator's mesh", func() (bool, string) {
		s, _ := f.Gossip.(*gossip.Mesh).Node("cp-3")
		return s.State == gossip.Dead, fmt.Sprintf("%+v", s)
	})
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-3 alive through etcd in the liveness record", func(l *api.Liveness) bool {
		n := l.Status.Nodes["cp-3"]
		return n.State == "alive" && strings.HasPrefix(n.Reason, "etcd member answers") && l.Status.Nodes["cp-2"].State == "alive"
	})
	// Its agent and member stop too: dead.
	if err := agents[1].Stop(); err != nil {
		t.Fatal(err)
	}
	waitObj(f, 30*time.Second, store.LivenessKey, "cp-3 dead in the liveness record", func(l *api.Liveness) bool {
		return l.Status.Nodes["cp-3"].State == "dead" && l.Status.Nodes["cp-2"].State == "alive"
	})
}

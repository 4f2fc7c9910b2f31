package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/testwait"
)

// TestAgentLockedOutOfTheMeshComesBackThroughItsEndpointsCache: a worker
// that knows only a gossip seed is off while the gossip key is rotated
// twice; the mesh no longer understands it (its key generation is not
// among the three every member holds), so gossip cannot name etcd's
// voters. It reaches etcd through the endpoints it cached on its last
// run, follows the stored key generation and is back in the mesh.
func TestAgentLockedOutOfTheMeshComesBackThroughItsEndpointsCache(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	m1 := f.startMesh("cp-1", 191)
	seed := m1.Addr()
	cp := f.AgentConfig("cp-1", true)
	cp.Gossip = m1
	f.Start(cp)
	f.WaitVoters(30*time.Second, "cp-1")

	cache := filepath.Join(f.TempDir(), "etcd-endpoints.json")
	cfg := f.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	cfg.Endpoints, cfg.EndpointsCache, cfg.DiscoverGrace = nil, cache, time.Second
	cfg.Gossip = f.startMesh("w-1", 192, seed)
	n := f.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready through gossip", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	testwait.For(t, 10*time.Second, "w-1 to cache the endpoints", func() (bool, string) {
		_, err := os.Stat(cache)
		return err == nil, fmt.Sprint(err)
	})
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	_ = cfg.Gossip.(*gossip.Mesh).Shutdown()

	// Two rotations while w-1 is off.
	for range 2 {
		if _, err := gossipkey.Rotate(context.Background(), f.Store(), "test", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "cp-1 on key generation 2", func() (bool, string) {
		return m1.KeyGeneration() == 2, fmt.Sprintf("at %d", m1.KeyGeneration())
	})

	// w-1 comes back at generation 0: locked out of the mesh.
	stale := f.startMesh("w-1", 192, seed)
	if _, err := stale.Join([]string{seed}); !errors.Is(err, gossip.ErrJoin) {
		t.Fatalf("a generation-0 member joined a generation-2 mesh: %v", err)
	}
	cfg.Gossip = stale
	n = f.Start(cfg)
	testwait.For(t, 60*time.Second, "w-1 ready again through its endpoints cache", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	testwait.For(t, 30*time.Second, "w-1 back in the mesh on generation 2", func() (bool, string) {
		s, ok := m1.Node("w-1")
		return stale.KeyGeneration() == 2 && ok && s.State == gossip.Alive, fmt.Sprintf("w-1 at generation %d, seen by cp-1 as %+v", stale.KeyGeneration(), s)
	})
}

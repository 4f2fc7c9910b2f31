package gossipkey

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// runMember runs a mesh member that follows the stored key generation, as
// an agent does; stop leaves the mesh and waits.
func runMember(t *testing.T, st *store.Store, name, ip, dataDir string, seeds ...string) (*gossip.Mesh, func()) {
	t.Helper()
	m, err := gossip.New(gossip.Config{Name: name, BindAddr: ip, Profile: gossip.ProfileFast, Token: []byte("rejoin-token"),
		Seeds: seeds, DataDir: dataDir, Logger: logging.Test(t).With("node", name)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop, err := gossip.Background(ctx, m, logging.Test(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, st, m, 100*time.Millisecond, logging.Test(t)) }()
	var once bool
	s := func() {
		if once {
			return
		}
		once = true
		stop()
		cancel()
		<-done
	}
	t.Cleanup(s)
	return m, s
}

// TestRejoinAfterTwoRotationsOffline: a member stopped while the key is
// rotated twice no longer holds any key the others use; restarted, it
// starts from the generation it persisted (0600), re-reads the current one
// from etcd, and rejoins.
func TestRejoinAfterTwoRotationsOffline(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	a, _ := runMember(t, st, "a", "127.0.0.81", dirs[0])
	b, _ := runMember(t, st, "b", "127.0.0.82", dirs[1], a.Addr())
	_, stopC := runMember(t, st, "c", "127.0.0.83", dirs[2], a.Addr())
	seesAlive := func(m *gossip.Mesh, peer string) func() (bool, string) {
		return func() (bool, string) {
			s, _ := m.Node(peer)
			return s.State == gossip.Alive, fmt.Sprintf("%s sees %s %q", "a", peer, s.State)
		}
	}
	testwait.For(t, 30*time.Second, "a to see c alive", seesAlive(a, "c"))

	stopC()
	for range 2 {
		if _, err := Rotate(ctx, st, "test", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "a and b on generation 2", func() (bool, string) {
		return a.KeyGeneration() == 2 && b.KeyGeneration() == 2, fmt.Sprintf("a %d, b %d", a.KeyGeneration(), b.KeyGeneration())
	})
	fi, err := os.Stat(filepath.Join(dirs[2], gossip.KeyStateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("c's persisted key generation: %v, %v (want mode 0600)", fi, err)
	}

	// c holds generations 0 and 1; a and b, 1, 2 and 3 and speak 2.
	c, _ := runMember(t, st, "c", "127.0.0.83", dirs[2], a.Addr())
	testwait.For(t, 30*time.Second, "c rejoined, seen alive by a and b", func() (bool, string) {
		for _, m := range []*gossip.Mesh{a, b} {
			if ok, why := seesAlive(m, "c")(); !ok {
				return false, why
			}
		}
		return c.KeyGeneration() == 2, fmt.Sprintf("c on generation %d", c.KeyGeneration())
	})
	if g := persisted(t, dirs[2]); g != 2 {
		t.Fatalf("c persisted generation %d, want 2", g)
	}

	// Restarted again, c starts on generation 2 at once.
	m, err := gossip.New(gossip.Config{Name: "c", BindAddr: "127.0.0.84", Token: []byte("rejoin-token"), DataDir: dirs[2]})
	if err != nil {
		t.Fatal(err)
	}
	if g := m.KeyGeneration(); g != 2 {
		t.Fatalf("a member made from c's data dir starts on generation %d, want 2", g)
	}
}

func persisted(t *testing.T, dir string) uint64 {
	t.Helper()
	m, err := gossip.New(gossip.Config{Name: "probe", Token: []byte("rejoin-token"), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return m.KeyGeneration()
}

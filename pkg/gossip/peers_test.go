package gossip

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/testwait"
)

// goneSeedMesh runs a seed s0 and members s1, s3 and s2 that joined
// through it (s2 with dataDir, "" for none), then stops the seed for good
// and kills s2 (no leave), waiting until s1 sees both dead. s1 and s3 keep
// each other, so neither is alone and reaches out to s2: its restart must
// find them. It returns s1, the seed's address and s2's config, bound to
// the port it had, for the restart.
func goneSeedMesh(t *testing.T, ip int, dataDir string) (s1 *member, seed string, restart Config) {
	t.Helper()
	host := func(i int) string { return "127.0.0." + strconv.Itoa(ip+i) }
	s0 := startMember(t, Config{Name: "s0", BindAddr: host(0)})
	seed = s0.Addr()
	s1 = startMember(t, Config{Name: "s1", BindAddr: host(1), Seeds: []string{seed}})
	s3 := startMember(t, Config{Name: "s3", BindAddr: host(3), Seeds: []string{seed}})
	cfg := Config{Name: "s2", BindAddr: host(2), Seeds: []string{seed}, DataDir: dataDir}
	s2 := startMember(t, cfg)
	all := []*member{s0, s1, s2, s3}
	testwait.True(t, 30*time.Second, "every member to see every other alive", func() bool {
		for _, m := range all {
			for _, o := range all {
				if stateOfPeer(m.Mesh, o.cfg.Name) != Alive {
					return false
				}
			}
		}
		return true
	})
	_, port, _ := net.SplitHostPort(s2.Addr())
	cfg.BindPort, _ = strconv.Atoi(port) // a machine's gossip port is fixed
	if dataDir != "" {
		testwait.True(t, 10*time.Second, "s2 to remember s1", func() bool {
			return slices.ContainsFunc(s2.RememberedPeers(), func(p Peer) bool { return p.Name == "s1" })
		})
	}
	s0.kill() // the bootstrap host, removed from the cluster
	s2.kill()
	testwait.True(t, 30*time.Second, "s1 to see s0 and s2 dead", func() bool {
		return stateOfPeer(s1.Mesh, "s0") == Dead && stateOfPeer(s1.Mesh, "s2") == Dead && stateOfPeer(s3.Mesh, "s2") == Dead
	})
	return s1, seed, cfg
}

// waitRejoined waits until s1 and the restarted s2 see each other alive.
func waitRejoined(t *testing.T, s1, s2 *member) {
	t.Helper()
	testwait.True(t, 30*time.Second, "restarted s2 back in the mesh (s1 and s2 see each other alive)", func() bool {
		return stateOfPeer(s1.Mesh, "s2") == Alive && stateOfPeer(s2.Mesh, "s1") == Alive
	})
}

// TestRestartWithGoneSeedRejoinsThroughPeersLastSeen: a member whose only
// seed was stopped for good is restarted with only that seed configured;
// it rejoins through the peers it kept in its data dir.
func TestRestartWithGoneSeedRejoinsThroughPeersLastSeen(t *testing.T) {
	dir := t.TempDir()
	s1, _, cfg := goneSeedMesh(t, 80, dir)
	if fi, err := os.Stat(filepath.Join(dir, PeersFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v; want it kept, mode 0600", PeersFile, fi, err)
	}
	s2 := startMember(t, cfg)
	waitRejoined(t, s1, s2)
}

// TestRestartWithGoneSeedRejoinsThroughItsPeerSource: the same with no
// data dir: the member rejoins through what its peer source names (the
// agent's reads the store's node records), passing over addresses that do
// not answer.
func TestRestartWithGoneSeedRejoinsThroughItsPeerSource(t *testing.T) {
	s1, seed, cfg := goneSeedMesh(t, 85, "")
	s2 := startMember(t, cfg)
	asked := make(chan struct{}, 1)
	s2.SetPeerSource(func(ctx context.Context) ([]string, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return []string{seed, s2.Addr(), s1.Addr()}, nil
	})
	waitRejoined(t, s1, s2)
	select {
	case <-asked:
	default:
		t.Fatal("s2 rejoined without asking its peer source")
	}
}

// TestPeersKeptAreBoundedAndStable: at most maxRememberedPeers are kept,
// those kept stay while alive, and none are forgotten while none is alive.
func TestPeersKeptAreBoundedAndStable(t *testing.T) {
	m, err := New(Config{Name: "me", BindAddr: "127.0.0.1", Token: []byte("t")})
	if err != nil {
		t.Fatal(err)
	}
	alive := func(names ...string) {
		m.tracker = newTracker(time.Now)
		for _, n := range names {
			m.tracker.nodes[n] = &NodeState{Name: n, Addr: n + ":7946", State: Alive}
		}
	}
	var names []string
	for i := range maxRememberedPeers + 4 {
		names = append(names, "p"+strconv.Itoa(10+i))
	}
	alive(append([]string{"me"}, names...)...)
	m.rememberPeers()
	got := m.RememberedPeers()
	if len(got) != maxRememberedPeers || got[0].Name != "p10" || slices.ContainsFunc(got, func(p Peer) bool { return p.Name == "me" }) {
		t.Fatalf("kept %v, want the first %d peers by name, not itself", got, maxRememberedPeers)
	}
	// p10 dies: the others stay, one more comes in.
	alive(names[1:]...)
	m.rememberPeers()
	got = m.RememberedPeers()
	if len(got) != maxRememberedPeers || got[0].Name != "p11" || got[len(got)-1].Name != names[maxRememberedPeers] {
		t.Fatalf("kept %v after p10 died", got)
	}
	alive()
	m.rememberPeers()
	if again := m.RememberedPeers(); !slices.Equal(again, got) {
		t.Fatalf("kept %v while none was alive, want %v", again, got)
	}
}

// TestUnusablePeersFileIsIgnored: a peers file that does not parse leaves
// the member with none remembered; it starts all the same.
func TestUnusablePeersFileIsIgnored(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PeersFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Name: "me", BindAddr: "127.0.0.1", Token: []byte("t"), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.RememberedPeers(); len(got) != 0 {
		t.Fatalf("remembered %v from an unusable file", got)
	}
}

package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
)

// member is one mesh run by a test.
type member struct {
	*Mesh
	cancel context.CancelFunc
	done   chan struct{}
}

// stop stops the member gracefully (it leaves the mesh).
func (m *member) stop() {
	m.cancel()
	<-m.done
}

// kill stops it the way kill -9 would look to the others: no leave.
func (m *member) kill() {
	_ = m.Shutdown()
	m.cancel()
	<-m.done
}

// startMember starts a member; each before runs between New and Start.
func startMember(t *testing.T, cfg Config, before ...func(*Mesh)) *member {
	t.Helper()
	if cfg.Profile == "" {
		cfg.Profile = ProfileFast
	}
	if cfg.Token == nil && cfg.Key == nil {
		cfg.Token = []byte("test-token")
	}
	if cfg.Logger == nil {
		cfg.Logger = logging.Test(t).With("node", cfg.Name)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(m)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mb := &member{Mesh: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(mb.done)
		if err := m.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", cfg.Name, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-mb.done
	})
	return mb
}

func stateOfPeer(m *Mesh, name string) State {
	n, ok := m.Node(name)
	if !ok {
		return ""
	}
	return n.State
}

func TestMeshJoinLearnKillRestartLeave(t *testing.T) {
	const n = 5
	var ms []*member
	for i := range n {
		cfg := Config{Name: fmt.Sprintf("n%d", i), BindAddr: fmt.Sprintf("127.0.0.%d", 10+i)}
		cfg.Meta.Roles = []string{"worker"}
		if i < 3 {
			cfg.Meta = Meta{Roles: []string{"controlPlane"}, ClientURL: fmt.Sprintf("http://127.0.0.%d:2379", 10+i), Health: HealthOK | HealthEtcd | HealthVoter}
		}
		if i > 0 {
			cfg.Seeds = []string{ms[0].Addr()} // one seed for all
		}
		ms = append(ms, startMember(t, cfg))
	}
	for i, m := range ms {
		testwait.True(t, 30*time.Second, fmt.Sprintf("n%d to see %d alive members", i, n), func() bool {
			alive := 0
			for _, s := range m.Nodes() {
				if s.State == Alive {
					alive++
				}
			}
			return alive == n
		})
	}
	// The last member, which knew only the seed, learned the voters' URLs.
	got := EtcdEndpoints(ms[n-1].Nodes())
	if want := "http://127.0.0.10:2379,http://127.0.0.11:2379,http://127.0.0.12:2379"; strings.Join(got, ",") != want {
		t.Fatalf("endpoints learned = %v, want %s", got, want)
	}

	// kill -9: seen dead (through suspicion) by the others.
	ms[2].kill()
	testwait.True(t, 30*time.Second, "n2 seen dead", func() bool { return stateOfPeer(ms[0].Mesh, "n2") == Dead })
	dead, _ := ms[0].Node("n2")
	if dead.Since.IsZero() {
		t.Fatal("dead state has no time")
	}

	// Restarted (new process, new port, same name): alive again.
	ms[2] = startMember(t, Config{Name: "n2", BindAddr: "127.0.0.12", Seeds: []string{ms[0].Addr()}})
	testwait.True(t, 30*time.Second, "n2 seen alive again", func() bool {
		s, _ := ms[4].Node("n2")
		return s.State == Alive && s.Since.After(dead.Since)
	})

	// A graceful stop is seen as left.
	ms[3].stop()
	testwait.True(t, 30*time.Second, "n3 seen left", func() bool { return stateOfPeer(ms[0].Mesh, "n3") == Left })
}

// recorder is a slog handler that keeps the messages it gets.
type recorder struct {
	mu   *sync.Mutex
	msgs *[]string
}

func newRecorder() recorder { return recorder{mu: new(sync.Mutex), msgs: new([]string)} }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.msgs = append(*r.msgs, rec.Message)
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }
func (r recorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for _, m := range *r.msgs {
		if strings.Contains(m, substr) {
			c++
		}
	}
	return c
}

func TestWrongKeyIsRejectedAndLoggedOnce(t *testing.T) {
	rec := newRecorder()
	seed := startMember(t, Config{Name: "seed", BindAddr: "127.0.0.20", Logger: slog.New(rec)})
	bad, err := New(Config{Name: "intruder", BindAddr: "127.0.0.21", Profile: ProfileFast, Token: []byte("another-token"), Logger: logging.Test(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	defer bad.Shutdown()
	for range 5 {
		if _, err := bad.Join([]string{seed.Addr()}); !errors.Is(err, ErrJoin) {
			t.Fatalf("join with a wrong key: err = %v, want ErrJoin", err)
		}
	}
	testwait.True(t, 10*time.Second, "the seed to report the rejection", func() bool { return rec.count("different key rejected") > 0 })
	if c := rec.count("different key rejected"); c != 1 {
		t.Fatalf("rejection logged %d times for 5 attempts, want once", c)
	}
	if _, ok := seed.Node("intruder"); ok {
		t.Fatal("the intruder is in the seed's member list")
	}
}

func TestKeyRotationWithoutRestart(t *testing.T) {
	a := startMember(t, Config{Name: "a", BindAddr: "127.0.0.30"})
	b := startMember(t, Config{Name: "b", BindAddr: "127.0.0.31", Seeds: []string{a.Addr()}})
	testwait.True(t, 20*time.Second, "b to join", func() bool { return stateOfPeer(a.Mesh, "b") == Alive })
	// a moves to generation 1 first; b still talks to it, then follows.
	if err := a.SetKeyGeneration(1); err != nil {
		t.Fatal(err)
	}
	c := startMember(t, Config{Name: "c", BindAddr: "127.0.0.32", KeyGeneration: 1, Seeds: []string{b.Addr()}})
	testwait.True(t, 20*time.Second, "c (generation 1) to join through b (generation 0)", func() bool { return stateOfPeer(a.Mesh, "c") == Alive })
	if err := b.SetKeyGeneration(1); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{a, b, c} {
		if err := m.SetKeyGeneration(2); err != nil {
			t.Fatal(err)
		}
	}
	// A member still at generation 0 now holds no key the others use.
	stale, _ := New(Config{Name: "stale", BindAddr: "127.0.0.33", Profile: ProfileFast, Token: []byte("test-token"), Logger: logging.Test(t)})
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	defer stale.Shutdown()
	if _, err := stale.Join([]string{a.Addr()}); !errors.Is(err, ErrJoin) {
		t.Fatalf("generation 0 joined a generation 2 mesh: %v", err)
	}
	// The mesh of a, b, c is intact:
	testwait.True(t, 20*time.Second, "a, b, c alive after rotation", func() bool {
		return stateOfPeer(c.Mesh, "a") == Alive && stateOfPeer(c.Mesh, "b") == Alive
	})
	if err := (&Mesh{cfg: Config{Key: make([]byte, 32)}}).SetKeyGeneration(1); !errors.Is(err, ErrStaticKey) {
		t.Fatalf("static key rotation: %v", err)
	}
}

func TestMetadataUpdateIsSeen(t *testing.T) {
	a := startMember(t, Config{Name: "a", BindAddr: "127.0.0.40"})
	b := startMember(t, Config{Name: "b", BindAddr: "127.0.0.41", Seeds: []string{a.Addr()}})
	testwait.True(t, 20*time.Second, "b to join", func() bool { return stateOfPeer(a.Mesh, "b") == Alive })
	if err := b.SetMeta(Meta{ClientURL: "http://127.0.0.41:2379", Health: HealthVoter, Generation: "7"}); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 20*time.Second, "a to see b's new metadata", func() bool {
		n, _ := a.Node("b")
		return n.Meta.Generation == "7" && n.Meta.Name == "b"
	})
	if err := b.SetMeta(Meta{Generation: strings.Repeat("x", 600)}); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("oversized metadata: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	ok := Config{Name: "a", BindAddr: "127.0.0.50", Token: []byte("t")}
	for _, tc := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"seed that does not resolve", `gossip.seeds: seed "no-such-host.invalid:7946" does not resolve`, func(c *Config) { c.Seeds = []string{"no-such-host.invalid:7946"} }},
		{"seed with a bad port", `gossip.seeds: seed "10.0.0.1:99999"`, func(c *Config) { c.Seeds = []string{"10.0.0.1:99999"} }},
		{"key of the wrong length", "gossip.key: gossip: bad key: 20 bytes; accepted: 16, 24 or 32", func(c *Config) { c.Key = make([]byte, 20) }},
		{"metadata too large", "metadata: gossip: metadata too large", func(c *Config) { c.Meta.Version = strings.Repeat("v", 600) }},
		{"unknown profile", `gossip.profile: "lab" is not accepted`, func(c *Config) { c.Profile = "lab" }},
		{"no token", "tokenFile: the cluster token is empty", func(c *Config) { c.Token = nil }},
		{"bad bind", `gossip.bind: "localhost" is not an IP address`, func(c *Config) { c.BindAddr = "localhost" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := New(c)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.51:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	m, err := New(Config{Name: "a", BindAddr: "127.0.0.51", BindPort: port, Token: []byte("t")})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start()
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), fmt.Sprintf("gossip.port %d", port)) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("err = %v, want ErrStart naming gossip.port and the address in use", err)
	}
	_ = m.Shutdown()
}

func TestLifecycleIsIdempotent(t *testing.T) {
	m, err := New(Config{Name: "a", BindAddr: "127.0.0.52", Token: []byte("t")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Leave(time.Second); err != nil { // before Start: no-op
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := m.Leave(time.Second); err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Start(); !errors.Is(err, ErrStart) {
		t.Fatalf("start after shutdown: %v", err)
	}
	if _, err := m.Join([]string{"127.0.0.1"}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("join after shutdown: %v", err)
	}
}

// history records every state change a mesh sees of one peer.
type history struct {
	peer string
	mu   sync.Mutex
	seq  []NodeState
	on   bool
}

// hook wraps m's tracker so every change of h.peer is recorded (while on).
func (h *history) hook(m *Mesh) {
	prev := m.tracker.onEvent
	m.tracker.onEvent = func(n NodeState, was State) {
		if n.Name == h.peer {
			h.mu.Lock()
			if h.on {
				h.seq = append(h.seq, n)
			}
			h.mu.Unlock()
		}
		prev(n, was)
	}
}

// start records from now on, beginning with m's current view of the peer.
func (h *history) start(m *Mesh) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = true
	if s, ok := m.tracker.get(h.peer); ok {
		h.seq = append(h.seq, s)
	}
}
func (h *history) states() ([]State, []NodeState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []State
	for _, s := range h.seq {
		out = append(out, s.State)
	}
	return out, slices.Clone(h.seq)
}

// TestCutOffPeerSeenSuspectBeforeDead: a member that stops answering
// (killed: no leave) is seen suspect, then dead, by every other member,
// not only by the one whose probe failed first, each state with the time
// it changed.
func TestCutOffPeerSeenSuspectBeforeDead(t *testing.T) {
	const n = 4
	var ms []*member
	hs := make([]*history, n-1)
	for i := range n {
		cfg := Config{Name: fmt.Sprintf("s%d", i), BindAddr: fmt.Sprintf("127.0.0.%d", 30+i)}
		if i > 0 {
			cfg.Seeds = []string{ms[0].Addr()}
		}
		var before []func(*Mesh)
		if i < n-1 {
			hs[i] = &history{peer: fmt.Sprintf("s%d", n-1)}
			before = append(before, hs[i].hook)
		}
		ms = append(ms, startMember(t, cfg, before...))
	}
	observers := ms[:n-1]
	for i, m := range ms {
		testwait.True(t, 30*time.Second, fmt.Sprintf("s%d to see all alive", i), func() bool {
			alive := 0
			for _, s := range m.Nodes() {
				if s.State == Alive {
					alive++
				}
			}
			return alive == n
		})
	}
	for i, h := range hs {
		h.start(ms[i].Mesh)
	}
	killed := time.Now()
	ms[n-1].kill()
	testwait.True(t, 30*time.Second, "every member to see s3 dead", func() bool {
		for _, m := range observers {
			if stateOfPeer(m.Mesh, "s3") != Dead {
				return false
			}
		}
		return true
	})
	for i, h := range hs {
		states, seq := h.states()
		// A false suspicion (the fast profile on a busy machine) may be
		// under way at the kill; what matters is that dead came right
		// after suspect.
		if len(states) < 2 || states[len(states)-1] != Dead || states[len(states)-2] != Suspect {
			t.Fatalf("s%d saw s3 go through %v after the kill, want ... suspect, dead", i, states)
		}
		sus, dead := seq[len(seq)-2], seq[len(seq)-1]
		if dead.Since.Before(sus.Since) || sus.Since.IsZero() {
			t.Fatalf("s%d: suspect at %s, dead at %s", i, sus.Since, dead.Since)
		}
		t.Logf("s%d: s3 suspect %s after the kill, dead %s later", i, sus.Since.Sub(killed).Round(time.Millisecond), dead.Since.Sub(sus.Since).Round(time.Millisecond))
	}
}

package gossip

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors of the mesh.
var (
	ErrStart      = errors.New("gossip: cannot start")
	ErrJoin       = errors.New("gossip: cannot join")
	ErrNotStarted = errors.New("gossip: mesh not started")
	ErrStaticKey  = errors.New("gossip: the key is static (gossip.key); rotation needs keys derived from the token")
)

// Mesh is this process's member of the gossip mesh.
type Mesh struct {
	// probeFailures counts this member's failed probes (localSuspect).
	probeFailures atomic.Uint64
	cfg           Config
	log           *slog.Logger
	tracker       *tracker
	logs          *logBridge
	bcast         *broadcasts
	base          memberlist.Config // the profile's configuration, tuned (memberlistConfig)

	metaMu   sync.Mutex
	meta     []byte
	metaSpec Meta

	mu       sync.Mutex
	ml       *memberlist.Memberlist
	addr     string // this member's host:port, read once at Start
	keyring  *memberlist.Keyring
	gen      uint64
	sec      secrets       // what the keys derive from (secret.go)
	rejoin   chan struct{} // a new key generation: join again at once
	left     bool
	shutdown bool

	peersMu    sync.Mutex
	remembered []Peer     // the peers last seen alive (peers.go)
	source     PeerSource // where to learn more when alone; nil: nowhere
}

// New validates cfg and prepares a member; it binds and starts nothing.
func New(cfg Config) (*Mesh, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	meta, _ := cfg.Meta.Encode() // validate encoded it
	m := &Mesh{cfg: cfg, log: cfg.Logger.With("component", "gossip"), meta: meta, metaSpec: cfg.Meta, gen: cfg.KeyGeneration, sec: secrets{cur: cfg.Token}, rejoin: make(chan struct{}, 1)}
	if cfg.DataDir != "" && cfg.Key == nil {
		switch g, ok, err := loadKeyGeneration(cfg.DataDir, cfg.Token); {
		case err != nil:
			m.log.Warn("the persisted gossip key generation is not usable", "dir", cfg.DataDir, "err", err)
		case ok && g > m.gen:
			m.log.Info("gossip key generation from the last run", "generation", g, "file", KeyStateFile)
			m.gen = g
		}
	}
	m.loadRemembered()
	base, _ := profileConfig(cfg.Profile) // validate checked the profile
	if cfg.Tune != nil {
		cfg.Tune(base)
	}
	m.base = *base
	m.tracker = newTracker(cfg.Now)
	m.tracker.onEvent = func(n NodeState, prev State) {
		if n.Name != cfg.Name {
			m.log.Info("peer state changed", "peer", n.Name, "addr", n.Addr, "state", n.State, "was", prev)
		}
	}
	m.logs = newLogBridge(m.log, cfg.Now)
	m.bcast = newBroadcasts(m.memberlistConfig().RetransmitMult)
	m.logs.onSuspect = m.localSuspect
	return m, nil
}

// Start binds the gossip port and starts memberlist. It is idempotent.
func (m *Mesh) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return fmt.Errorf("%w: it was shut down", ErrStart)
	}
	if m.ml != nil {
		return nil
	}
	c := m.memberlistConfig()
	c.Name = m.cfg.Name
	c.BindAddr = m.cfg.BindAddr
	c.BindPort = m.cfg.BindPort
	c.AdvertisePort = m.cfg.BindPort
	adv, err := m.advertiseAddr()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStart, err)
	}
	c.AdvertiseAddr = adv
	kr, err := m.newKeyring()
	if err != nil {
		return err
	}
	c.Keyring = kr
	c.Delegate = delegate{m}
	c.Events = m.tracker
	c.Conflict = conflicts{m}
	c.Logger = log.New(m.logs, "", 0)
	ml, err := memberlist.Create(c)
	if err != nil {
		return fmt.Errorf("%w: gossip.bind %s, gossip.port %d: %w", ErrStart, m.cfg.BindAddr, m.cfg.BindPort, err)
	}
	m.ml, m.keyring = ml, kr
	m.addr = ml.LocalNode().Address() // nothing else writes it yet
	m.persistKeyGeneration(m.gen, m.sec)
	m.log.Info("gossip started", "node", m.cfg.Name, "addr", m.addr, "profile", m.cfg.Profile, "key_generation", m.gen)
	return nil
}

func (m *Mesh) newKeyring() (*memberlist.Keyring, error) {
	if m.cfg.Key != nil {
		return memberlist.NewKeyring(nil, m.cfg.Key)
	}
	keys, err := windowKeys(m.sec, m.gen)
	if err != nil {
		return nil, err
	}
	return memberlist.NewKeyring(keys[1:], keys[0])
}

// windowKeys derives the keys a member of generation gen holds, primary
// first, each from the secret of its generation.
func windowKeys(sec secrets, gen uint64) ([][]byte, error) {
	var keys [][]byte
	for _, g := range window(gen) {
		k, err := DeriveKey(sec.of(g), g)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (m *Mesh) memberlist() (*memberlist.Memberlist, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ml == nil || m.shutdown {
		return nil, ErrNotStarted
	}
	return m.ml, nil
}

// Addr is the host:port others reach this member on.
func (m *Mesh) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ml == nil || m.shutdown {
		return ""
	}
	return m.addr
}

// Join contacts seeds (host or host:port, DefaultPort when none) and
// returns how many answered. It fails only when none did.
func (m *Mesh) Join(seeds []string) (int, error) {
	ml, err := m.memberlist()
	if err != nil {
		return 0, err
	}
	var addrs []string
	for _, s := range seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, strconv.Itoa(DefaultPort))
		}
		addrs = append(addrs, s)
	}
	n, err := ml.Join(addrs)
	if n == 0 {
		if err == nil {
			err = errors.New("no seed answered")
		}
		return 0, fmt.Errorf("%w through gossip.seeds %v: %w", ErrJoin, seeds, err)
	}
	return n, nil
}

// Leave tells the others this member is going, waiting up to timeout:
// first through its metadata (HealthLeaving, so they record it left rather
// than dead), then through memberlist's leave. It is idempotent and a
// no-op before Start.
func (m *Mesh) Leave(timeout time.Duration) error {
	m.mu.Lock()
	if m.ml == nil || m.left || m.shutdown {
		m.mu.Unlock()
		return nil
	}
	m.left = true
	m.mu.Unlock()
	m.metaMu.Lock()
	spec := m.metaSpec
	m.metaMu.Unlock()
	spec.Health |= HealthLeaving
	if err := m.SetMeta(spec); err != nil {
		m.log.Warn("announcing the leave in metadata failed", "err", err)
	}
	m.pushLeaving()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return nil
	}
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// pushLeaving sends this member's state, with its leaving metadata, to
// every member it sees alive over TCP (a push/pull, as a join does), a few
// at a time. The metadata's broadcast goes over UDP to a few members at a
// time, and a member that missed it, or heard the leave first, would
// record this one dead rather than left (a loaded machine made that
// happen in TestMeshJoinLearnKillRestartLeave). Each push is bounded by
// the TCP timeout; a member that does not answer is left to the broadcast.
func (m *Mesh) pushLeaving() {
	ml, err := m.memberlist()
	if err != nil {
		return
	}
	self := ml.LocalNode().Name
	sem := make(chan struct{}, leavePushes)
	var wg sync.WaitGroup
	// Addresses come from the tracker (copied under memberlist's lock by its
	// events), never from Members' nodes, which memberlist keeps writing.
	for _, n := range m.tracker.snapshot() {
		if n.Name == self || (n.State != Alive && n.State != Suspect) || n.Addr == "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := ml.Join([]string{n.Name + "/" + n.Addr}); err != nil {
				m.log.Debug("leave not pushed; the broadcast carries it", "peer", n.Name, "err", err)
			}
		})
	}
	wg.Wait()
}

// leavePushes is how many members pushLeaving pushes to at once.
const leavePushes = 8

// Shutdown stops memberlist and closes its ports without telling anyone
// (others see it dead after suspicion; call Leave first to be seen left).
// It is idempotent.
func (m *Mesh) Shutdown() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return nil
	}
	m.shutdown = true
	if m.ml == nil {
		return nil
	}
	if err := m.ml.Shutdown(); err != nil {
		return fmt.Errorf("gossip: shutdown: %w", err)
	}
	return nil
}

// memberlistConfig is the profile's memberlist configuration, tuned: a
// copy of the one New built (building it anew reads the hostname and
// allocates the whole configuration, on every poll of every member).
func (m *Mesh) memberlistConfig() *memberlist.Config {
	c := m.base
	return &c
}

// StateCounts counts the peers this member knows of (itself included) by
// state, without copying them and without taking memberlist's lock (the
// member's own poll keeps the counts current): cheap enough to call on
// every member of a large mesh.
func (m *Mesh) StateCounts() map[State]int {
	return m.tracker.counts()
}

// Nodes returns every peer this member knows of, itself included, by name.
func (m *Mesh) Nodes() []NodeState {
	m.poll()
	return m.tracker.snapshot()
}

// Node returns one peer's state.
func (m *Mesh) Node(name string) (NodeState, bool) {
	m.poll()
	return m.tracker.get(name)
}

// Changed is signalled (coalesced) when a peer's state or metadata changes.
func (m *Mesh) Changed() <-chan struct{} { return m.tracker.changed }

// poll records suspects that refuted. memberlist's Members returns
// pointers into its own state, which it keeps writing without telling, so
// only the names (never written after creation) are read from them; the
// rest comes from its events (delivered under its lock).
func (m *Mesh) poll() {
	if ml, err := m.memberlist(); err == nil {
		members := ml.Members()
		names := make([]string, len(members))
		for i, n := range members {
			names[i] = n.Name
		}
		m.bcast.members.Store(int64(len(names)))
		m.expireSuspects(names)
	}
}

// maxSuspectPings bounds the suspects pinged per poll.
const maxSuspectPings = 3

// probeSuspects pings each suspect once and records those that answer
// alive again (memberlist has no event for a refuted suspicion).
func (m *Mesh) probeSuspects() {
	ml, err := m.memberlist()
	if err != nil {
		return
	}
	for i, n := range m.tracker.inState(Suspect) {
		if i == maxSuspectPings {
			break // the rest on the next polls (each ping may wait a probe timeout)
		}
		addr, err := net.ResolveUDPAddr("udp", n.Addr)
		if err != nil {
			continue
		}
		if _, err := ml.Ping(n.Name, addr); err == nil {
			m.tracker.refuted(n.Name)
		}
	}
}

// SetMeta publishes new metadata. Metadata that would not fit is refused
// and the old metadata stays.
func (m *Mesh) SetMeta(meta Meta) error {
	if meta.Name == "" {
		meta.Name = m.cfg.Name
	}
	b, err := meta.Encode()
	if err != nil {
		return err
	}
	m.metaMu.Lock()
	m.meta, m.metaSpec = b, meta
	m.metaMu.Unlock()
	ml, err := m.memberlist()
	if err != nil {
		return nil // published at Start
	}
	if err := ml.UpdateNode(m.memberlistConfig().TCPTimeout); err != nil {
		return fmt.Errorf("gossip: publishing metadata: %w", err)
	}
	return nil
}

// KeyGeneration is the generation whose key this member encrypts with.
func (m *Mesh) KeyGeneration() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// SetKeyGeneration installs the keys of generations gen-1, gen and gen+1,
// encrypts with gen's from now on, and drops every other key. Members a
// generation apart keep understanding each other (see the package doc).
func (m *Mesh) SetKeyGeneration(gen uint64) error {
	if m.cfg.Key != nil {
		return ErrStaticKey
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.installLocked(gen, m.sec)
}

// installLocked installs the keys of generation gen derived from sec (see
// SetKeyGeneration); m.mu is held.
func (m *Mesh) installLocked(gen uint64, sec secrets) error {
	keys, err := windowKeys(sec, gen)
	if err != nil {
		return err
	}
	if m.keyring == nil {
		m.gen, m.sec = gen, sec // installed at Start
		return nil
	}
	for _, k := range keys {
		if err := m.keyring.AddKey(k); err != nil {
			return fmt.Errorf("gossip: installing key generation %d: %w", gen, err)
		}
	}
	if err := m.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("gossip: using key generation %d: %w", gen, err)
	}
	keep := map[string]bool{}
	for _, k := range keys {
		keep[string(k)] = true
	}
	for _, k := range m.keyring.GetKeys() {
		if !keep[string(k)] {
			if err := m.keyring.RemoveKey(k); err != nil {
				return fmt.Errorf("gossip: dropping an old key: %w", err)
			}
		}
	}
	if gen != m.gen || !sec.same(m.sec) {
		m.log.Info("gossip key generation changed", "from", m.gen, "to", gen)
		m.persistKeyGeneration(gen, sec)
		m.wake()
	}
	m.gen, m.sec = gen, sec
	return nil
}

// persistKeyGeneration writes gen to DataDir, if set; a failure is logged.
func (m *Mesh) persistKeyGeneration(gen uint64, sec secrets) {
	if m.cfg.DataDir == "" || m.cfg.Key != nil {
		return
	}
	if err := saveKeyGeneration(m.cfg.DataDir, sec.of(gen), gen); err != nil {
		m.log.Warn("persisting the gossip key generation failed", "dir", m.cfg.DataDir, "err", err)
	}
}

// delegate hands memberlist this member's metadata.
type delegate struct{ m *Mesh }

func (d delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	return d.m.meta // Encode kept it within MaxMetaSize
}
func (d delegate) NotifyMsg(b []byte) { d.m.receive(b) }
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.bcast.q.GetBroadcasts(overhead, limit)
}
func (delegate) LocalState(join bool) []byte            { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool) {}

// conflicts logs two members claiming one name.
type conflicts struct{ m *Mesh }

func (c conflicts) NotifyConflict(existing, other *memberlist.Node) {
	c.m.log.Error("two machines claim one gossip name; give each a unique name", "node", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
}

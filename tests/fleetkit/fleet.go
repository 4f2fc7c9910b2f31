package fleetkit

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Timings of every fleet's agents, candidates and members (their raft
// ticks), which the benchmarks report against.
const (
	TickInterval    = 50 * time.Millisecond
	ElectionTimeout = 500 * time.Millisecond
	AgentRetry      = 500 * time.Millisecond
	CoordResync     = 200 * time.Millisecond
	CoordSession    = 2 * time.Second
	HealthTimeout   = time.Second
	// GrowBound is how long Grow waits for its voters unless the fleet
	// sets GrowWithin.
	GrowBound = 90 * time.Second
)

// DefaultPolicy is a fleet's membership policy unless a test sets Policy.
var DefaultPolicy = membership.Policy{LearnerStartTimeout: 20 * time.Second, LearnerProgressTimeout: 20 * time.Second}

// EmbeddedRuntime is an in-process etcd member with the fleet's raft
// timings: each agent's runtime unless the test sets Fleet.NewRuntime.
func EmbeddedRuntime() member.Runtime {
	return member.NewEmbedded(member.WithTimings(TickInterval, ElectionTimeout))
}

// ExecRuntime is a member run as a child process of the etcd binary at
// path with the fleet's raft timings; opts add to them (WithBinaries).
func ExecRuntime(path string, opts ...member.Option) member.Runtime {
	return member.NewExec(path, append([]member.Option{member.WithTimings(TickInterval, ElectionTimeout)}, opts...)...)
}

// Fleet is a set of agents and coordinator candidates under test. Set its
// exported fields before the first Start.
type Fleet struct {
	// TB is the test or benchmark the fleet belongs to.
	TB testing.TB
	// Policy is each new candidate's membership policy.
	Policy membership.Policy
	// CoordSession is each new candidate's election session TTL; 0 is
	// the package's CoordSession.
	CoordSession time.Duration
	// HealthTimeout bounds each new candidate's calls to one member; 0 is
	// the package's HealthTimeout.
	HealthTimeout time.Duration
	// GrowWithin bounds Grow's wait for its voters; 0 is GrowBound.
	GrowWithin time.Duration
	// NewRuntime makes each agent's member runtime (Start).
	NewRuntime func() member.Runtime
	// Log is the agents' and candidates' logger.
	Log *slog.Logger
	// Gossip, when set, is the next candidate's member of the mesh.
	Gossip coordinator.Gossip
	// CheckReady makes a control-plane agent's READY check that its
	// member is a voter (or its join standby) at that moment; a violation
	// is kept in the node's Notifier.
	CheckReady bool
	// ClusterToken and Version go into every AgentConfig.
	ClusterToken, Version string

	dir    string
	mu     sync.Mutex
	nodes  map[string]*Node
	coords map[string]*Coord
}

// New makes an empty fleet whose cleanup (registered now) stops it.
func New(tb testing.TB) *Fleet {
	f := &Fleet{
		// dir is made before StopAll is registered: cleanups run last in,
		// first out, so every member stops before its data dir goes (etcd
		// exits the process, silently, when its WAL dir vanishes under it).
		dir: tb.TempDir(),
		TB:  tb, nodes: map[string]*Node{}, coords: map[string]*Coord{},
		Policy:       DefaultPolicy,
		NewRuntime:   EmbeddedRuntime,
		Log:          slog.New(slog.DiscardHandler),
		ClusterToken: "nico-test",
		Version:      "test",
	}
	tb.Cleanup(f.StopAll)
	return f
}

// TempDir makes a directory that outlives every agent and candidate of
// the fleet (unlike tb.TempDir called after New).
func (f *Fleet) TempDir() string {
	f.TB.Helper()
	d, err := os.MkdirTemp(f.dir, "d-")
	if err != nil {
		f.TB.Fatal(err)
	}
	return d
}

// Endpoints are the client URLs of every agent started and not forgotten.
func (f *Fleet) Endpoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var eps []string
	for _, n := range f.nodes {
		eps = append(eps, n.Cfg.ClientURL)
	}
	slices.Sort(eps)
	return eps
}

// AgentConfig makes a control-plane agent's config on fresh loopback
// ports and a fresh data dir, pointed at every running agent's member; on
// https URLs (etcdtest.TLSDefault) it has a pki.dir, provisioned when the
// agent starts.
func (f *Fleet) AgentConfig(name string, bootstrap bool) agent.Config {
	dir := f.TempDir()
	peer, client := etcdtest.URLs(f.TB)
	cfg := agent.Config{
		Name: name, Roles: []api.Role{api.RoleControlPlane}, Bootstrap: bootstrap,
		DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: f.ClusterToken, Endpoints: f.Endpoints(), DialTimeout: 3 * time.Second,
		Prefix: store.DefaultPrefix, HeartbeatTTL: 3 * time.Second, RetryInterval: AgentRetry, Version: f.Version,
	}
	if strings.HasPrefix(client, "https://") {
		cfg.PKI.Dir = pki.Dir(filepath.Join(dir, "pki"))
	}
	return cfg
}

// Start provisions cfg (Provision, through the running members) and runs
// an agent with it and a fresh runtime.
func (f *Fleet) Start(cfg agent.Config) *Node { return f.StartWith(cfg, f.NewRuntime()) }

// StartWith is Start with the runtime rt.
func (f *Fleet) StartWith(cfg agent.Config, rt member.Runtime) *Node {
	f.TB.Helper()
	Provision(f.TB, cfg, f.Endpoints())
	return f.Run(cfg, rt)
}

// Run runs an agent with cfg, already provisioned, and runtime rt until
// it returns or the fleet stops; opts adjust the node (its agent made, not
// yet running) first.
func (f *Fleet) Run(cfg agent.Config, rt member.Runtime, opts ...func(*Node)) *Node {
	n := &Node{Name: cfg.Name, Cfg: cfg, Runtime: rt, Done: make(chan error, 1), Notify: &Notifier{}}
	n.Agent = agent.New(cfg, rt, n.Notify, f.Log.With("test-node", cfg.Name))
	if f.CheckReady && slices.Contains(cfg.Roles, api.RoleControlPlane) {
		n.Notify.OnReady = func() error { return f.CheckVoterOrStandby(cfg.Name, cfg.PeerURL) }
	}
	for _, o := range opts {
		o(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.Cancel = cancel
	f.Add(n)
	go func() { n.Done <- n.Agent.Run(ctx) }()
	return n
}

// Add counts n, an agent the test runs itself, in the fleet: its client
// URL among the endpoints, stopped by StopAll.
func (f *Fleet) Add(n *Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.Name] = n
}

// Forget drops a node that has stopped for good (removed) from the fleet.
func (f *Fleet) Forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, name)
}

// Node is the running agent named name, or nil.
func (f *Fleet) Node(name string) *Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name]
}

// Nodes are the fleet's agents ordered by name.
func (f *Fleet) Nodes() []*Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	return ns
}

// Coord is the candidate named name, or nil.
func (f *Fleet) Coord(name string) *Coord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.coords[name]
}

// StopAll ends every candidate, then every agent, each waiting for its
// member (the fleet's cleanup).
func (f *Fleet) StopAll() {
	f.mu.Lock()
	coords := make([]*Coord, 0, len(f.coords))
	for _, c := range f.coords {
		coords = append(coords, c)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range coords {
		wg.Go(c.Stop)
	}
	wg.Wait()
	for _, n := range f.Nodes() {
		wg.Go(func() {
			if err := n.Stop(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, agent.ErrRemoved) {
				f.TB.Logf("stopping %s: %v", n.Name, err)
			}
		})
	}
	wg.Wait()
}

// Client returns a raw client (root, unscoped) of the fleet's members,
// closed when the test ends.
func (f *Fleet) Client() *clientv3.Client {
	return etcdtest.NewClient(f.TB, f.Endpoints()...)
}

// Store returns a store over the fleet's endpoints.
func (f *Fleet) Store() *store.Store {
	f.TB.Helper()
	st, err := store.New(f.Client(), store.DefaultPrefix)
	if err != nil {
		f.TB.Fatal(err)
	}
	return st
}

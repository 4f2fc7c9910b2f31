// Package integration runs nico's agents and coordinators against real etcd
// members (embedded, and etcd binaries) in one test process, on loopback.
package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fleet is a set of agents and coordinator candidates under test.
type fleet struct {
	t      *testing.T
	mu     sync.Mutex
	nodes  map[string]*node
	coords map[string]*coord
	policy membership.Policy
	// newRuntime makes each agent's member runtime.
	newRuntime func() member.Runtime
	log        *slog.Logger
	// gossip, when set, is the next coordinator's member of the mesh.
	gossip coordinator.Gossip
	dir    string
}

// tempDir makes a directory that outlives every agent and coordinator of
// the fleet (unlike t.TempDir called after newFleet).
func (f *fleet) tempDir() string {
	f.t.Helper()
	d, err := os.MkdirTemp(f.dir, "d-")
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

type node struct {
	name    string
	cfg     agent.Config
	agent   *agent.Agent
	runtime member.Runtime
	cancel  context.CancelFunc
	done    chan error
	notify  *notifier
}

type coord struct {
	name   string
	c      *coordinator.Coordinator
	cancel context.CancelFunc
	done   chan error
	cli    *clientv3.Client
	steps  chan membership.Step

	stopOnce sync.Once
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{
		// dir is made before stopAll is registered: cleanups run last in,
		// first out, so every member stops before its data dir goes (etcd
		// exits the process, silently, when its WAL dir vanishes under it).
		dir: t.TempDir(),
		t:   t, nodes: map[string]*node{}, coords: map[string]*coord{},
		policy: membership.Policy{LearnerStartTimeout: 20 * time.Second, LearnerProgressTimeout: 20 * time.Second},
		newRuntime: func() member.Runtime {
			return member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
		},
		log: testLogger(t),
	}
	t.Cleanup(f.stopAll)
	return f
}

// endpoints are the client URLs of every agent that was started.
func (f *fleet) endpoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var eps []string
	for _, n := range f.nodes {
		eps = append(eps, n.cfg.ClientURL)
	}
	slices.Sort(eps)
	return eps
}

// agentConfig makes a control-plane agent's config on fresh loopback ports;
// on https URLs (etcdtest.TLSDefault) it has a pki.dir, provisioned when
// the agent starts.
func (f *fleet) agentConfig(name string, bootstrap bool) agent.Config {
	dir := f.tempDir()
	peer, client := etcdtest.URLs(f.t)
	cfg := agent.Config{
		Name: name, Roles: []api.Role{api.RoleControlPlane}, Bootstrap: bootstrap,
		DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "nico-test", Endpoints: f.endpoints(), DialTimeout: 3 * time.Second,
		Prefix: store.DefaultPrefix, HeartbeatTTL: 3 * time.Second, RetryInterval: 500 * time.Millisecond, Version: "test",
	}
	if strings.HasPrefix(client, "https://") {
		cfg.PKI.Dir = pki.Dir(filepath.Join(dir, "pki"))
	}
	return cfg
}

// provision gives an agent what its join would have (fleetkit.Provision):
// control-plane agents get ca.key and issue their own certificates, the
// others their certificate and etcd user; the agents never need the join
// endpoint.
func (f *fleet) provision(cfg agent.Config) {
	f.t.Helper()
	fleetkit.Provision(f.t, cfg, f.endpoints())
}

// start runs an agent with cfg and a fresh runtime.
func (f *fleet) start(cfg agent.Config) *node { return f.startWith(cfg, f.newRuntime()) }

// startWith runs an agent with cfg and runtime rt.
func (f *fleet) startWith(cfg agent.Config, rt member.Runtime) *node {
	f.provision(cfg)
	n := &node{name: cfg.Name, cfg: cfg, runtime: rt, done: make(chan error, 1), notify: &notifier{}}
	n.agent = agent.New(cfg, rt, n.notify, f.log.With("test-node", cfg.Name))
	if cfg.Roles[0] == api.RoleControlPlane {
		n.notify.onReady = func() error { return f.checkVoterOrStandby(cfg.Name, cfg.PeerURL) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.agent.Run(ctx) }()
	f.mu.Lock()
	f.nodes[cfg.Name] = n
	f.mu.Unlock()
	return n
}

// waitRemoved waits until n's agent returned ErrRemoved; failing says
// what (what did not happen within).
func (n *node) waitRemoved(t *testing.T, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-n.done:
		n.done <- err
		if !errors.Is(err, agent.ErrRemoved) {
			t.Fatalf("%s returned %v, want ErrRemoved", n.name, err)
		}
	case <-time.After(within):
		t.Fatal(what)
	}
}

// stop ends an agent gracefully and returns what Run returned.
func (n *node) stop() error {
	n.cancel()
	var err error
	select {
	case err = <-n.done:
		n.done <- err
	case <-time.After(30 * time.Second):
		// Still wait for its member below: the agent may yet stop it.
		err = errors.New("agent did not stop within 30s")
	}
	// The agent gives its member 10 s to stop; etcd's close cannot be cut
	// short and may take longer on a loaded machine. Wait for it, or the
	// fleet's cleanup removes the data dir of a running etcd, which then
	// ends the whole test process (a fatal "failed to purge snap file").
	select {
	case <-n.runtime.Done():
	case <-time.After(60 * time.Second):
		return errors.New("member did not exit within 60s of its agent")
	}
	return err
}

// startCoordinator runs a candidate with its own client; opts adjust the
// coordinator before it runs.
func (f *fleet) startCoordinator(name string, opts ...func(*coord)) *coord {
	cli := etcdtest.Dial(f.t, pki.CoordinatorIdentity, time.Second, f.endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		f.t.Fatal(err)
	}
	c := &coord{name: name, cli: cli, done: make(chan error, 1), steps: make(chan membership.Step, 1000)}
	c.c = coordinator.New(coordinator.Config{Name: name, SessionTTL: 2 * time.Second, Policy: f.policy, ResyncInterval: 200 * time.Millisecond, HealthTimeout: time.Second, Gossip: f.gossip}, st, f.log.With("test-coord", name))
	c.c.OnStep = func(s membership.Step) {
		select {
		case c.steps <- s:
		default:
		}
	}
	for _, o := range opts {
		o(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- c.c.Run(ctx) }()
	f.mu.Lock()
	f.coords[name] = c
	f.mu.Unlock()
	return c
}

func (c *coord) stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.cli.Close()
	})
}

// crash kills the candidate without resigning: its connection drops, and
// its session lease is left to expire.
func (c *coord) crash() {
	c.cli.Close()
	c.stop()
}

func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, c := range f.coords {
		wg.Add(1)
		go func(c *coord) { defer wg.Done(); c.stop() }(c)
	}
	wg.Wait()
	for _, n := range f.nodes {
		wg.Add(1)
		go func(n *node) {
			defer wg.Done()
			if err := n.stop(); err != nil && !errors.Is(err, context.Canceled) {
				f.t.Logf("stopping %s: %v", n.name, err)
			}
		}(n)
	}
	wg.Wait()
}

// client returns a raw client (unscoped) for assertions.
func (f *fleet) client() *clientv3.Client {
	return etcdtest.NewClient(f.t, f.endpoints()...)
}

// members returns the member list: name -> learner.
func members(ctx context.Context, cli *clientv3.Client) (map[string]bool, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range resp.Members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("unstarted-%x", m.ID)
		}
		out[name] = m.IsLearner
	}
	return out, nil
}

// waitVoters waits until exactly the named members are voters and no
// learner is left.
func (f *fleet) waitVoters(within time.Duration, names ...string) {
	f.t.Helper()
	waitVotersThrough(f.t, f.client(), within, names...)
}

// waitVotersThrough is waitVoters with the client cli.
func waitVotersThrough(t *testing.T, cli *clientv3.Client, within time.Duration, names ...string) {
	t.Helper()
	want := slices.Clone(names)
	slices.Sort(want)
	testwait.For(t, within, "voters "+strings.Join(want, ","), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := members(ctx, cli)
		if err != nil {
			return false, err.Error()
		}
		var voters []string
		for n, learner := range ms {
			if !learner {
				voters = append(voters, n)
			}
		}
		slices.Sort(voters)
		if !slices.Equal(voters, want) || len(ms) != len(want) {
			return false, fmt.Sprint(ms)
		}
		// Settled: the operation that got there is closed too.
		active, err := cli.Get(ctx, store.DefaultPrefix+store.ActiveOpKey)
		if err != nil || len(active.Kvs) > 0 {
			return false, fmt.Sprintf("members %v, an operation is still active", ms)
		}
		// And every member answers, so that the next step's quorum check
		// (which refuses a change while one is unhealthy) sees them all.
		if sick := unhealthyMembers(ctx, cli); len(sick) > 0 {
			return false, fmt.Sprintf("members %v, not answering: %v", ms, sick)
		}
		return true, ""
	})
}

// unhealthyMembers names the members whose Status call fails.
func unhealthyMembers(ctx context.Context, cli *clientv3.Client) []string {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	var sick []string
	for _, m := range resp.Members {
		if len(m.ClientURLs) == 0 {
			sick = append(sick, m.Name+" (no client URL)")
			continue
		}
		if _, err := cli.Status(ctx, m.ClientURLs[0]); err != nil {
			sick = append(sick, m.Name)
		}
	}
	return sick
}

// leaderName is the coordinator leader's candidate name.
func (f *fleet) leaderName() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	name, _ := coordinator.Leader(ctx, f.store())
	return name
}

// etcdLeader returns the node name of the etcd leader.
func (f *fleet) etcdLeader() string {
	f.t.Helper()
	cli := f.client()
	var name string
	testwait.For(f.t, 20*time.Second, "etcd leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms.Members {
			if len(m.ClientURLs) == 0 {
				continue
			}
			st, err := cli.Status(ctx, m.ClientURLs[0])
			if err == nil && st.Leader == m.ID {
				name = m.Name
				return true, ""
			}
		}
		return false, "no member says it leads"
	})
	return name
}

// gated wraps a runtime so that Start waits until open is closed.
type gated struct {
	member.Runtime
	open chan struct{}
}

func (g *gated) Start(ctx context.Context, cfg member.Config) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Runtime.Start(ctx, cfg)
}

// failing wraps a runtime so that Start fails while fail holds.
type failing struct {
	member.Runtime
	fail   atomic.Bool
	starts atomic.Int32
}

func (r *failing) Start(ctx context.Context, cfg member.Config) error {
	r.starts.Add(1)
	if r.fail.Load() {
		return errors.New("simulated: member cannot start")
	}
	return r.Runtime.Start(ctx, cfg)
}

// notifier records what the agent tells the service manager; onReady
// checks, at the moment READY is sent, that the agent may send it.
type notifier struct {
	mu       sync.Mutex
	ready    int
	readyErr error
	onReady  func() error
}

func (n *notifier) Ready() error {
	var err error
	if n.onReady != nil {
		err = n.onReady()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ready++
	if err != nil && n.readyErr == nil {
		n.readyErr = err
	}
	return nil
}

func (n *notifier) Status(string) error { return nil }
func (n *notifier) Stopping() error     { return nil }

// readyState returns how often READY was sent and the first violation.
func (n *notifier) readyState() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready, n.readyErr
}

// checkVoter fails unless the member at peer is a voter.
func (f *fleet) checkVoter(peer string) error {
	cli := f.client()
	// Closed now, not when the test ends: an agent that gets ready during
	// the fleet's teardown would otherwise hold a connection to its member
	// open while the member stops, until every member has stopped.
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, peer) && !m.IsLearner {
			return nil
		}
	}
	return fmt.Errorf("READY sent while the member at %s is not a voter", peer)
}

// checkVoterOrStandby fails unless the member at peer is a voter or the
// node's join request is marked Standby (the cluster has its voters).
func (f *fleet) checkVoterOrStandby(name, peer string) error {
	err := f.checkVoter(peer)
	if err == nil {
		return nil
	}
	cli := f.client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, gerr := cli.Get(ctx, store.DefaultPrefix+store.JoinKey(name))
	if gerr != nil || len(resp.Kvs) == 0 {
		return err
	}
	j := &api.JoinRequest{}
	if derr := store.Decode(resp.Kvs[0], j); derr == nil && j.Status.Phase == api.JoinPending && j.Status.Standby {
		return nil
	}
	return err
}

// setVoters writes spec.voters into the fleet's EtcdCluster, creating it
// when absent (a coordinator then plans with it from its first pass).
func (f *fleet) setVoters(n int) {
	f.t.Helper()
	st := f.store()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ec := api.NewEtcdCluster()
	if err := st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		f.t.Fatal(err)
	}
	ec.Spec.Voters = n
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		f.t.Fatal(err)
	}
}

// testLogger logs to t.
func testLogger(t *testing.T) *slog.Logger { return logging.Test(t) }

// store returns a store over the fleet's endpoints.
func (f *fleet) store() *store.Store {
	f.t.Helper()
	st, err := store.New(etcdtest.NewClient(f.t, f.endpoints()...), store.DefaultPrefix)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// waitObj waits on a watch of the object at key until cond holds, and
// returns the object.
func waitObj[T any, PT interface {
	*T
	api.Object
}](f *fleet, within time.Duration, key string, what string, cond func(PT) bool) PT {
	f.t.Helper()
	st := f.store()
	var got PT
	testwait.Key(f.t, st.Client(), key, within, what, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return false, key + " absent"
		}
		obj := PT(new(T))
		if err := store.Decode(kv, obj); err != nil {
			return false, err.Error()
		}
		got = obj
		return cond(obj), fmt.Sprintf("%+v", obj)
	})
	return got
}

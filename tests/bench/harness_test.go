// Package bench measures nico against real, in-process etcd members on
// loopback: how long a joining node takes to become a voter, beside a
// kubeadm-style baseline measured in the same run, and what a writing
// client sees while the cluster grows and shrinks. `make bench` runs it;
// each benchmark does its whole measurement once (-benchtime 1x), prints a
// table with b.Log and reports its key figures with b.ReportMetric.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagJoins = flag.Int("nico.joins", 10, "measured joins per arm and store size")
	flagLog   = flag.String("nico.log", "", "log agents and coordinators to stderr at this level (debug, info, warn)")
)

// Raft timings of every member in these benchmarks, nico's and the
// baseline's alike.
const (
	tickInterval    = 50 * time.Millisecond
	electionTimeout = 500 * time.Millisecond
)

// Settings the agents and the coordinator run with: those of
// tests/integration.
var (
	agentRetry    = 500 * time.Millisecond
	coordResync   = 200 * time.Millisecond
	coordSession  = 2 * time.Second
	healthTimeout = time.Second
	learnerPolicy = membership.Policy{LearnerStartTimeout: 20 * time.Second, LearnerProgressTimeout: 20 * time.Second}
)

func newRuntime() member.Runtime {
	opts := []member.Option{member.WithTimings(tickInterval, electionTimeout)}
	if *flagTrace {
		opts = append(opts, member.WithEtcdLogLevel(slog.LevelInfo))
	}
	return member.NewEmbedded(opts...)
}

func benchLogger(tb testing.TB) *slog.Logger {
	if *flagLog == "" {
		return slog.New(slog.DiscardHandler)
	}
	log, err := logging.New(os.Stderr, *flagLog, "text")
	if err != nil {
		tb.Fatal(err)
	}
	return log
}

// fleet is a bootstrap agent and a coordinator, and the agents started since.
type fleet struct {
	tb  testing.TB
	log *slog.Logger
	// cli is a raw client of the bootstrap member, for polls and data.
	cli *clientv3.Client
	st  *store.Store
	// trace, with -nico.trace, records the fleet's log (trace_test.go).
	trace *tracer
	coord context.CancelFunc
	done  chan error

	mu    sync.Mutex
	nodes map[string]*node
}

// node is one running agent.
type node struct {
	cfg    agent.Config
	dir    string
	cancel context.CancelFunc
	done   chan error
}

// newFleet bootstraps boot and runs a coordinator, and returns once the
// member is a voter and the coordinator leads.
func newFleet(tb testing.TB, boot string) *fleet {
	f := &fleet{tb: tb, log: benchLogger(tb), nodes: map[string]*node{}, done: make(chan error, 1)}
	if *flagTrace {
		f.trace = &tracer{}
		f.log = slog.New(f.trace.handler())
	}
	// Cleanups run last first: the temporary directories must outlive the
	// members, or etcd exits the process when it cannot purge its WAL.
	_ = tb.TempDir()
	tb.Cleanup(f.stop)
	n := f.start(f.agentConfig(boot, true))
	f.cli = etcdtest.NewClient(tb, n.cfg.ClientURL)
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	if _, err := watchJoin(ctx, f.cli, n.cfg.PeerURL, time.Now())(); err != nil {
		tb.Fatalf("bootstrap %s: %v", boot, err)
	}
	cli := etcdtest.Dial(tb, pki.CoordinatorIdentity, time.Second, n.cfg.ClientURL)
	tb.Cleanup(func() { cli.Close() })
	var err error
	if f.st, err = store.New(cli, store.DefaultPrefix); err != nil {
		tb.Fatal(err)
	}
	declareVoters(tb, f.st, 7)
	c := coordinator.New(coordinator.Config{Name: "c-" + boot, SessionTTL: coordSession, Policy: learnerPolicy, ResyncInterval: coordResync, HealthTimeout: healthTimeout}, f.st, f.log)
	cctx, stop := context.WithCancel(context.Background())
	f.coord = stop
	go func() { f.done <- c.Run(cctx) }()
	for {
		if name, _ := coordinator.Leader(ctx, f.st); name != "" {
			return f
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("coordinator not elected: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agentConfig is a control-plane agent on fresh loopback ports and a fresh
// data dir, pointed at every running agent's member; on https URLs
// (etcdtest.TLSDefault) with a pki.dir that start provisions.
func (f *fleet) agentConfig(name string, bootstrap bool) agent.Config {
	dir := f.tb.TempDir()
	peer, client := etcdtest.URLs(f.tb)
	cfg := agent.Config{
		Name: name, Roles: []api.Role{api.RoleControlPlane}, Bootstrap: bootstrap,
		DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "nico-bench", Endpoints: f.endpoints(), DialTimeout: 3 * time.Second,
		Prefix: store.DefaultPrefix, HeartbeatTTL: 3 * time.Second, RetryInterval: agentRetry, Version: "bench",
	}
	if strings.HasPrefix(client, "https://") {
		cfg.PKI.Dir = pki.Dir(filepath.Join(dir, "pki"))
	}
	return cfg
}

// provision gives a new agent what its join would have (fleetkit.Provision).
func (f *fleet) provision(cfg agent.Config) { fleetkit.Provision(f.tb, cfg, f.endpoints()) }

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

// nodeList returns the running agents ordered by name.
func (f *fleet) nodeList() []*node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ns []*node
	for _, n := range f.nodes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b *node) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	return ns
}

// start runs an agent with cfg until it is removed or the fleet stops.
func (f *fleet) start(cfg agent.Config) *node {
	f.provision(cfg)
	return f.run(cfg)
}

// run is start for a cfg already provisioned.
func (f *fleet) run(cfg agent.Config) *node {
	n := &node{cfg: cfg, dir: filepath.Dir(cfg.DataDir), done: make(chan error, 1)}
	a := agent.New(cfg, newRuntime(), nopNotifier{}, f.log)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	f.mu.Lock()
	f.nodes[cfg.Name] = n
	f.mu.Unlock()
	go func() { n.done <- a.Run(ctx) }()
	return n
}

// remove files a removal request for n, waits until the coordinator has
// done it and the agent has stopped, and deletes the node's data.
func (f *fleet) remove(ctx context.Context, n *node) error {
	r := api.NewRemoveRequest(n.cfg.Name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.RequestedBy = "bench"
	if err := f.st.Put(ctx, store.RemovalKey(n.cfg.Name), r); err != nil {
		return fmt.Errorf("request removal of %s: %w", n.cfg.Name, err)
	}
	// Waited on a watch of the request; ctx bounds the wait.
	var answer error
	err := testwait.KeyUntil(ctx, f.st.Client(), store.RemovalKey(n.cfg.Name), 24*time.Hour, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return true, "" // the agent clears its request once it has left
		}
		got := &api.RemoveRequest{}
		if err := store.Decode(kv, got); err != nil {
			return false, err.Error()
		}
		switch got.Status.Phase {
		case api.RemoveRefused, api.RemoveFailed:
			answer = fmt.Errorf("removal of %s: %s: %s", n.cfg.Name, got.Status.Phase, got.Status.Message)
			return true, ""
		case api.RemoveDone:
			return true, ""
		}
		return false, fmt.Sprintf("last phase %q", got.Status.Phase)
	})
	if err != nil {
		return fmt.Errorf("removal of %s: %w", n.cfg.Name, err)
	}
	if answer != nil {
		return answer
	}
	select {
	case err := <-n.done:
		if !errors.Is(err, agent.ErrRemoved) {
			return fmt.Errorf("removed agent %s returned %v, want ErrRemoved", n.cfg.Name, err)
		}
	case <-ctx.Done():
		return fmt.Errorf("removed agent %s did not stop: %w", n.cfg.Name, ctx.Err())
	}
	n.done <- agent.ErrRemoved
	f.mu.Lock()
	delete(f.nodes, n.cfg.Name)
	f.mu.Unlock()
	return os.RemoveAll(n.dir)
}

// stop ends the coordinator, then every agent.
func (f *fleet) stop() {
	if f.coord != nil {
		f.coord()
		<-f.done
	}
	var wg sync.WaitGroup
	for _, n := range f.nodeList() {
		wg.Go(func() {
			n.cancel()
			select {
			case <-n.done:
			case <-time.After(30 * time.Second):
			}
		})
	}
	wg.Wait()
}

// etcdLeader returns the node whose member leads etcd, asking each member
// through the store's client, which follows the member list.
func (f *fleet) etcdLeader(ctx context.Context) (*node, error) {
	cli := f.st.Client()
	for {
		if ms, err := cli.MemberList(ctx); err == nil {
			for _, m := range ms.Members {
				if len(m.ClientURLs) == 0 {
					continue
				}
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				st, err := cli.Status(sctx, m.ClientURLs[0])
				cancel()
				f.mu.Lock()
				n := f.nodes[m.Name]
				f.mu.Unlock()
				if err == nil && st.Leader == m.ID && n != nil {
					return n, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no etcd leader: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitVoters waits until the cluster has exactly n members, all voters.
func (f *fleet) waitVoters(ctx context.Context, n int) error {
	for {
		ms, err := f.st.Client().MemberList(ctx)
		if err == nil && len(ms.Members) == n && !slices.ContainsFunc(ms.Members, func(m *etcdserverpb.Member) bool { return m.IsLearner }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d voters: %w", n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// joinTimes are the moments, counted from the start of a join, at which the
// member list first showed the new member as added (an unstarted learner),
// named (the leader applied the learner's publish; it may not serve
// clients yet) and a voter; and how long its untimed removal took.
type joinTimes struct{ added, named, voter, removal time.Duration }

// pollEvery is how often watchJoin reads the member list (-nico.poll):
// the resolution of every join time.
var pollEvery = 20 * time.Millisecond

func init() {
	flag.DurationVar(&pollEvery, "nico.poll", pollEvery, "how often a join benchmark reads the member list (the resolution of its times)")
}

// watchJoin polls the member list (serializable, from cli's endpoint) until
// the member with peerURL is a voter; the returned func waits for that.
func watchJoin(ctx context.Context, cli *clientv3.Client, peerURL string, t0 time.Time) func() (joinTimes, error) {
	type result struct {
		jt  joinTimes
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var jt joinTimes
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := cli.MemberList(cctx, clientv3.WithSerializable())
			cancel()
			now := time.Since(t0)
			if err == nil {
				for _, m := range resp.Members {
					if !slices.Contains(m.PeerURLs, peerURL) {
						continue
					}
					if jt.added == 0 {
						jt.added = now
					}
					if jt.named == 0 && m.Name != "" {
						jt.named = now
					}
					if !m.IsLearner {
						jt.voter = now
						ch <- result{jt: jt}
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				ch <- result{jt: jt, err: fmt.Errorf("member at %s not a voter: %w (seen %+v)", peerURL, ctx.Err(), jt)}
				return
			case <-time.After(pollEvery):
			}
		}
	}()
	return func() (joinTimes, error) { r := <-ch; return r.jt, r.err }
}

type nopNotifier struct{}

func (nopNotifier) Ready() error        { return nil }
func (nopNotifier) Status(string) error { return nil }
func (nopNotifier) Stopping() error     { return nil }

// declareVoters writes the fleet's EtcdCluster asking for n voters before
// a coordinator runs (it would write its bootstrap default of three): the
// benchmarks want every control-plane host they start a voter.
func declareVoters(tb testing.TB, st *store.Store, n int) {
	tb.Helper()
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = n
	if err := st.Put(tb.Context(), store.EtcdClusterKey, ec); err != nil {
		tb.Fatal(err)
	}
}

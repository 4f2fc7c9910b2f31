// Package kube runs nico's Kubernetes clusters end to end on the sandbox:
// in-process agents (embedded etcd members on the control-plane machines)
// whose exec applier runs the generation of tests/kubetest.Machine (a real
// kube-apiserver, controller-manager and scheduler per control-plane
// machine, on nico's etcd), and a coordinator. It holds the end-to-end test
// and the benchmarks (apply to Ready, a worker rollout per node); make
// e2e-kube runs them.
package kube

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
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"github.com/homystack/nico/tests/kubetest"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fleet is nico's control-plane machines cp-1..cp-N (etcd voters, each
// with a coordinator candidate's leader elected among one) and data-plane
// machines dp-1..dp-M, every one a sandbox machine whose exec applier runs
// the Kubernetes generation.
type fleet struct {
	tb   testing.TB
	dir  string
	log  *slog.Logger
	bins kubetest.Binaries

	st    *store.Store
	root  *clientv3.Client // etcd root, for assertions
	box   *secretbox.Box   // the store's secrets key (clusters only)
	coord context.CancelFunc
	done  chan error

	// images are the workers' OCI archives (with workers).
	images []string

	mu       sync.Mutex
	nodes    map[string]*node
	machines map[string]*kubetest.Machine
}

type node struct {
	// host is the loopback address its components are probed at.
	host   string
	cfg    agent.Config
	rt     member.Runtime
	cancel context.CancelFunc
	done   chan error
}

// fleetOptions adjust a fleet before its agents start.
type fleetOptions struct {
	cps, dps int
	// coordinator adjusts the coordinator before it runs.
	coordinator func(*coordinator.Coordinator)
	// clusters runs the Kubernetes cluster controller with kubepki's
	// secrets, the agents' component probes and their secret sources.
	clusters bool
	// workers runs a real worker (containerd and a kubelet, with the
	// images of kubetest.BuildImages) on each data-plane machine, dp-N at
	// 10.77.0.N+1 and its pods in 10.244.N+1.0/24 (the test runs in a network
	// namespace holding those addresses, kubetest.InNetns), and the
	// cluster controller with the clusters' API (coordinator.KubeAPI):
	// the bootstrap token registered, readiness from the Nodes.
	workers bool
	// runtime, when set, makes each control-plane machine's member
	// runtime (nil: embedded etcd).
	runtime func() member.Runtime
	// cpKubelets runs a real worker on each control-plane machine too
	// (with workers), cp-N at 10.77.0.N+100 and its pods in
	// 10.244.N+100.0/24: their kubelets register Nodes named after them.
	cpKubelets bool
}

// workerIP is machine dp-N's or cp-N's node address with workers (a
// control-plane machine's with cpKubelets).
func workerIP(machine string) string {
	var n int
	if _, err := fmt.Sscanf(machine, "dp-%d", &n); err == nil {
		return fmt.Sprintf("10.77.0.%d", n+1)
	}
	if _, err := fmt.Sscanf(machine, "cp-%d", &n); err == nil {
		return fmt.Sprintf("10.77.0.%d", n+100)
	}
	return ""
}

// address is machine's own loopback address (its Machine's status), where
// its control plane listens: cp-1 127.0.0.1 (where the default component
// probes look), cp-2 127.0.0.2, ..., dp-1 after the control plane.
func (f *fleet) address(machine string) string {
	names := f.nodeNames()
	for i, n := range names {
		if n == machine {
			return fmt.Sprintf("127.0.0.%d", i+1)
		}
	}
	return ""
}

// newFleet starts the fleet and returns once every control-plane machine's
// member is a voter, the coordinator leads and every agent is healthy.
// Cleanups stop the control planes the generations started, then the
// coordinator, then the agents (an API server stops before its etcd).
func newFleet(tb testing.TB, opts fleetOptions) *fleet {
	tb.Helper()
	f := &fleet{tb: tb, dir: tb.TempDir(), log: testLog(tb), bins: kubetest.FindBinaries(tb),
		nodes: map[string]*node{}, machines: map[string]*kubetest.Machine{}, done: make(chan error, 1)}
	tb.Cleanup(f.stop)
	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Minute)
	defer cancel()
	if opts.workers {
		var err error
		if f.images, err = kubetest.BuildImages(ctx, f.dir); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 1; i <= opts.cps; i++ {
		name := fmt.Sprintf("cp-%d", i)
		f.start(name, []api.Role{api.RoleControlPlane}, i == 1, opts)
		if i == 1 {
			f.root = etcdtest.NewClient(tb, f.endpoints()...)
			f.waitVoters(ctx, 1)
			f.startCoordinator(opts)
		}
	}
	f.waitVoters(ctx, opts.cps)
	for i := 1; i <= opts.dps; i++ {
		f.start(fmt.Sprintf("dp-%d", i), []api.Role{api.RoleWorker}, false, opts)
	}
	for _, name := range f.nodeNames() {
		if a := f.address(name); a != f.nodes[name].host {
			tb.Fatalf("%s probes its components at %s, but its control plane listens on %s", name, f.nodes[name].host, a)
		}
	}
	f.declareMachines(ctx)
	testwait.For(tb, time.Minute, "every node registered", func() (bool, string) {
		var missing []string
		for _, n := range f.nodeNames() {
			var got api.Node
			if err := f.st.Get(ctx, store.NodeKey(n), &got); err != nil {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, "not registered: " + strings.Join(missing, ",")
	})
	return f
}

func testLog(tb testing.TB) *slog.Logger {
	if os.Getenv("NICO_KUBE_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return logging.Test(tb)
}

// start runs one agent, with a sandbox machine as its applier.
func (f *fleet) start(name string, roles []api.Role, bootstrap bool, opts fleetOptions) {
	f.tb.Helper()
	dir := filepath.Join(f.dir, name)
	peer, client := etcdtest.URLs(f.tb)
	cfg := agent.Config{
		Name: name, Roles: roles, Bootstrap: bootstrap,
		DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "nico-kube", Endpoints: f.endpoints(), DialTimeout: 3 * time.Second,
		Prefix: store.DefaultPrefix, HeartbeatTTL: 3 * time.Second, RetryInterval: 500 * time.Millisecond, Version: "kube",
	}
	if roles[0] != api.RoleControlPlane {
		cfg.PeerURL, cfg.ClientURL, cfg.DataDir = "", "", ""
	}
	if strings.HasPrefix(client, "https://") {
		cfg.PKI.Dir = pki.Dir(filepath.Join(dir, "pki"))
	}
	m := &kubetest.Machine{Name: name, Root: filepath.Join(dir, "root"), Binaries: f.bins, Log: f.log}
	if opts.workers && (roles[0] != api.RoleControlPlane || opts.cpKubelets) {
		// Each worker's pods get a bridge and a range of their own: the
		// workers of one test share a network namespace.
		n := strings.TrimPrefix(workerIP(name), "10.77.0.")
		m.Worker = &kubetest.WorkerConfig{Kubelet: f.bins.Kubelet, NodeIP: workerIP(name), Dir: filepath.Join(dir, "worker"),
			PodCIDR: "10.244." + n + ".0/24", Bridge: "cni" + n, Images: f.images}
	}
	var secrets apply.Secrets
	if opts.clusters {
		b := &boundSecrets{machine: name, keyFile: cfg.PKI.Dir.Key(pki.NodeLeaf)}
		cfg.OnConnect, secrets = b.bind, b
		// The probes read the files under the machine's root, a
		// cluster's spec.kubeconfig.path (a host path) included.
		underRoot := func(p string) ([]byte, error) {
			if !strings.HasPrefix(p, m.Root+string(filepath.Separator)) {
				p = m.Path(p)
			}
			return os.ReadFile(p)
		}
		cfg.ComponentProbes = agent.ComponentProbeConfig{Interval: 200 * time.Millisecond, ClusterCA: m.Path(kubepki.DefaultPaths().CACert),
			Kubeconfig: m.Path("/etc/kubernetes/admin.conf"), ReadFile: underRoot}
		cfg.Drain = agent.DrainConfig{Kubeconfig: m.Path("/etc/kubernetes/admin.conf"), Resync: time.Second}
		cfg.KubeconfigPublish = agent.KubeconfigPublishConfig{Interval: 500 * time.Millisecond, ReadFile: func(p string) ([]byte, error) { return os.ReadFile(m.Path(p)) }}
	}
	// Each machine probes its own components, at the loopback address its
	// control plane listens on (f.address; machines start in name order,
	// newFleet checks the two agree): the sandbox's machines share a host.
	host := fmt.Sprintf("127.0.0.%d", len(f.nodeNames())+1)
	if opts.clusters && roles[0] == api.RoleControlPlane {
		// As nico-agent maps its componentProbes.* keys.
		cfg.ComponentProbes.URLs = config.ComponentProbes{
			APIServerURL:         fmt.Sprintf("https://%s:6443/readyz", host),
			ControllerManagerURL: fmt.Sprintf("https://%s:%d/healthz", host, kubetest.ControllerManagerPort),
			SchedulerURL:         fmt.Sprintf("https://%s:%d/healthz", host, kubetest.SchedulerPort),
		}.URLs()
	}
	gate := apply.Gate{Deadline: 10 * time.Second, Interval: 100 * time.Millisecond}
	a, err := m.Applier(gate, secrets)
	if err != nil {
		f.tb.Fatal(err)
	}
	cfg.Applier = a
	fleetkit.Provision(f.tb, cfg, f.endpoints())
	if bootstrap && opts.clusters {
		// The store's secrets key, as an agent that made the cluster CA
		// itself would have written it (the test's CA is provisioned).
		key, err := secretbox.NewKey()
		if err != nil {
			f.tb.Fatal(err)
		}
		if err := pki.WriteFile(cfg.PKI.Dir.SecretsKey(), key); err != nil {
			f.tb.Fatal(err)
		}
	}
	var rt member.Runtime = member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	if opts.runtime != nil && roles[0] == api.RoleControlPlane {
		rt = opts.runtime()
	}
	n := &node{host: host, cfg: cfg, rt: rt, done: make(chan error, 1)}
	ag := agent.New(cfg, rt, nopNotifier{}, f.log.With("node", name))
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	f.mu.Lock()
	f.nodes[name], f.machines[name] = n, m
	f.mu.Unlock()
	go func() { n.done <- ag.Run(ctx) }()
}

func (f *fleet) startCoordinator(opts fleetOptions) {
	cli := etcdtest.Dial(f.tb, pki.CoordinatorIdentity, time.Second, f.endpoints()...)
	f.tb.Cleanup(func() { cli.Close() })
	var err error
	if f.st, err = store.New(cli, store.DefaultPrefix); err != nil {
		f.tb.Fatal(err)
	}
	cfg := coordinator.Config{Name: "c-1", SessionTTL: 2 * time.Second, ResyncInterval: 200 * time.Millisecond, HealthTimeout: time.Second,
		Policy: membership.Policy{LearnerStartTimeout: 20 * time.Second, LearnerProgressTimeout: 20 * time.Second}}
	if opts.clusters {
		box, err := secretbox.Load(f.nodes["cp-1"].cfg.PKI.Dir.SecretsKey())
		if err != nil {
			f.tb.Fatal(err)
		}
		f.box = box
		sec := secrets.New(f.st, box)
		cfg.Clusters = coordinator.ClusterHooks{DefaultGitRepo: "https://git.example/kube",
			Secrets: &coordinator.KubePKISecrets{Secrets: sec, Store: f.st, Root: f.root, NicoCA: etcdtest.PKI(f.tb)}}
		if opts.workers {
			kapi := &coordinator.KubeAPI{Secrets: sec, Store: f.st}
			cfg.Clusters.API, cfg.Clusters.Nodes = kapi, kapi
		}
	}
	c := coordinator.New(cfg, f.st, f.log.With("coordinator", "c-1"))
	ctx, cancel := context.WithCancel(context.Background())
	f.coord = cancel
	go func() { f.done <- c.Run(ctx) }()
}

// stop stops the control planes, then the coordinator, then the agents
// and waits for their members.
func (f *fleet) stop() {
	var wg sync.WaitGroup
	for _, m := range f.machineList() {
		wg.Go(func() {
			if err := m.Stop(); err != nil {
				f.tb.Errorf("stop %s's control plane: %v", m.Name, err)
			}
		})
	}
	wg.Wait()
	if f.coord != nil {
		f.coord()
		<-f.done
	}
	f.mu.Lock()
	nodes := slices.Collect(func(yield func(*node) bool) {
		for _, n := range f.nodes {
			if !yield(n) {
				return
			}
		}
	})
	f.mu.Unlock()
	for _, n := range nodes {
		wg.Go(func() {
			n.cancel()
			select {
			case err := <-n.done:
				if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, agent.ErrRemoved) {
					f.tb.Logf("agent %s: %v", n.cfg.Name, err)
				}
			case <-time.After(30 * time.Second):
				f.tb.Errorf("agent %s did not stop", n.cfg.Name)
			}
			if n.cfg.DataDir != "" {
				select {
				case <-n.rt.Done():
				case <-time.After(60 * time.Second):
					f.tb.Errorf("member of %s did not stop", n.cfg.Name)
				}
			}
		})
	}
	wg.Wait()
}

func (f *fleet) endpoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var eps []string
	for _, n := range f.nodes {
		if n.cfg.ClientURL != "" {
			eps = append(eps, n.cfg.ClientURL)
		}
	}
	slices.Sort(eps)
	return eps
}

func (f *fleet) nodeNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (f *fleet) machineList() []*kubetest.Machine {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*kubetest.Machine
	for _, m := range f.machines {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *kubetest.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// waitVoters waits until etcd has exactly n members, all voters.
func (f *fleet) waitVoters(ctx context.Context, n int) {
	f.tb.Helper()
	testwait.For(f.tb, time.Until(deadline(ctx)), fmt.Sprintf("%d voters", n), func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ms, err := f.root.MemberList(cctx)
		if err != nil {
			return false, err.Error()
		}
		if len(ms.Members) != n || slices.ContainsFunc(ms.Members, func(m *etcdserverpb.Member) bool { return m.IsLearner }) {
			return false, fmt.Sprintf("%d members", len(ms.Members))
		}
		return true, ""
	})
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// declareMachines writes an external Machine per machine with its own
// loopback address (f.address): the cluster controller reads a machine's
// addresses there, and every node of the sandbox shares 127.0.0.1 else.
func (f *fleet) declareMachines(ctx context.Context) {
	f.tb.Helper()
	for _, n := range f.nodeNames() {
		m := api.NewMachine(n)
		m.Spec.Kind = api.MachineExternal
		m.Status.Addresses = []string{f.address(n)}
		if err := f.st.Put(ctx, store.MachineKey(n), m); err != nil {
			f.tb.Fatal(err)
		}
	}
}

// boundSecrets is an agent's secret source for its appliers, as
// nico-agent makes it: the machine's projected secrets
// (kubepki.NodeSource, opened with the node key) once the agent connected.
type boundSecrets struct {
	machine, keyFile string

	mu  sync.Mutex
	src apply.Secrets
}

// bind is agent.Config.OnConnect.
func (b *boundSecrets) bind(st *store.Store) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.src = kubepki.NodeSource{Store: st, Machine: b.machine, KeyFile: b.keyFile}
}

// Secret implements apply.Secrets.
func (b *boundSecrets) Secret(ctx context.Context, name string) (map[string][]byte, error) {
	b.mu.Lock()
	src := b.src
	b.mu.Unlock()
	if src == nil {
		return nil, fmt.Errorf("secret %s: %s's agent has not connected yet", name, b.machine)
	}
	return src.Secret(ctx, name)
}

type nopNotifier struct{}

func (nopNotifier) Ready() error        { return nil }
func (nopNotifier) Status(string) error { return nil }
func (nopNotifier) Stopping() error     { return nil }

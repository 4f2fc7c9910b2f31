package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
)

// perHost is how many machines' agents one agent host runs.
const perHost = 250

// spares are the machines each fleet provisions beyond its N, started
// later to measure a membership change.
const spares = 8

// fleet is one measured fleet: three etcd members (binaries) registered as
// control-plane nodes, nico's coordinator in this process, and N
// data-plane machines run by agent hosts.
type fleet struct {
	tb       testing.TB
	members  []*fleetkit.BinaryMember
	st       *store.Store
	coord    *coordinator.Coordinator
	names    []string // the N machines, started with their hosts
	spare    []string // provisioned, not started
	hosts    []*agentHost
	hostOf   map[string]*agentHost
	pkiDir   string    // each machine's pki.dir is pkiDir/NAME
	eps      []string  // the members' client URLs
	version  string    // the members' etcd version
	started  time.Time // when the agent hosts were started
	startRev int64     // the store's revision before the hosts started
	requests requestCounter
}

// newFleet starts the members and the coordinator and provisions n+spares
// machines (certificates and etcd identities, as their joins would); no
// agent runs yet.
func newFleet(ctx context.Context, tb testing.TB, bin etcdtest.Binary, n int) *fleet {
	tb.Helper()
	f := &fleet{tb: tb, hostOf: map[string]*agentHost{}}
	f.members = fleetkit.StartBinaryCluster(ctx, tb, bin, 3)
	var eps []string
	for _, m := range f.members {
		eps = append(eps, m.Client)
	}
	root := etcdtest.NewClient(tb, eps...)
	st, err := store.New(root, store.DefaultPrefix)
	if err != nil {
		tb.Fatal(err)
	}
	f.st = st
	for _, m := range f.members {
		fleetkit.RegisterMember(ctx, tb, st, m.Name, m.Peer, m.Client)
	}
	fleetkit.SetVoters(tb, st, 3)

	coordCli := etcdtest.Dial(tb, pki.CoordinatorIdentity, 5*time.Second, eps...)
	tb.Cleanup(func() { coordCli.Close() })
	cst, err := store.New(coordCli, store.DefaultPrefix)
	if err != nil {
		tb.Fatal(err)
	}
	// nico-coordinator's defaults (pkg/config).
	f.coord = coordinator.New(coordinator.Config{
		Name: "cp-0", SessionTTL: 10 * time.Second, ResyncInterval: time.Second, HealthTimeout: 2 * time.Second,
		Settle: coordinator.DefaultSettle, Policy: membership.Policy{LearnerStartTimeout: 2 * time.Minute, LearnerProgressTimeout: 2 * time.Minute},
	}, cst, quietLogger())
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.coord.Run(cctx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("coordinator: %v", err)
		}
	})
	waitLeader(ctx, tb, st)

	for i := range n + spares {
		name := fmt.Sprintf("m-%04d", i+1)
		if i < n {
			f.names = append(f.names, name)
		} else {
			f.spare = append(f.spare, name)
		}
	}
	f.provision(ctx, append(slices.Clone(f.names), f.spare...))
	f.eps, f.version = eps, bin.Version
	f.requests = newRequestCounter(tb, eps)
	return f
}

// provision gives each machine its node certificate and its etcd user and
// role, side by side.
func (f *fleet) provision(ctx context.Context, names []string) {
	dir := f.tb.TempDir()
	work := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range work {
				etcdtest.ProvisionPKI(f.tb, pki.Dir(filepath.Join(dir, name)), name, false)
				errs <- rbac.EnsureNode(ctx, f.st.Client().Auth, store.DefaultPrefix, name, []api.Role{api.RoleWorker})
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			f.tb.Fatalf("etcd identity: %v", err)
		}
	}
	f.pkiDir = dir
}

func waitLeader(ctx context.Context, tb testing.TB, st *store.Store) {
	tb.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		name, err := coordinator.Leader(ctx, st)
		if err != nil {
			tb.Fatal(err)
		}
		if name != "" {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatal("no coordinator leader")
		case <-tick.C:
		}
	}
}

// agentHost is one agent-host child process (runHost).
type agentHost struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	mu     sync.Mutex    // one command at a time
	exited chan struct{} // closed once the process has exited
}

// startHosts starts the agent hosts: each runs its share of the N
// machines at once and holds a share of the spares.
func (f *fleet) startHosts(ctx context.Context, applyTime time.Duration) {
	f.tb.Helper()
	rev, err := f.st.Client().Get(ctx, "revision")
	if err != nil {
		f.tb.Fatal(err)
	}
	f.startRev = rev.Header.Revision
	nh := max(1, (len(f.names)+perHost-1)/perHost)
	cfgs := make([]hostConfig, nh)
	for i := range cfgs {
		cfgs[i] = hostConfig{Endpoints: f.eps, Version: f.version, ApplyTime: applyTime}
	}
	for i, name := range f.names {
		cfgs[i%nh].Machines = append(cfgs[i%nh].Machines, hostMachine{Name: name, PKIDir: filepath.Join(f.pkiDir, name), Start: true})
	}
	for i, name := range f.spare {
		cfgs[i%nh].Machines = append(cfgs[i%nh].Machines, hostMachine{Name: name, PKIDir: filepath.Join(f.pkiDir, name)})
	}
	logs := f.tb.TempDir()
	f.started = time.Now()
	for i, cfg := range cfgs {
		h := f.startHost(cfg, filepath.Join(logs, fmt.Sprintf("host-%d", i)))
		for _, m := range cfg.Machines {
			f.hostOf[m.Name] = h
		}
	}
}

func (f *fleet) startHost(cfg hostConfig, base string) *agentHost {
	f.tb.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		f.tb.Fatal(err)
	}
	if err := os.WriteFile(base+".json", b, 0o600); err != nil {
		f.tb.Fatal(err)
	}
	logf, err := os.Create(base + ".log")
	if err != nil {
		f.tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHost+"="+base+".json")
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		f.tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.tb.Fatal(err)
	}
	h := &agentHost{cmd: cmd, in: in, out: bufio.NewScanner(out), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(h.exited)
	}()
	f.hosts = append(f.hosts, h)
	f.tb.Cleanup(func() {
		// Standard input's end stops every agent (their leases revoked);
		// a host that does not exit within a minute is killed.
		in.Close()
		select {
		case <-h.exited:
		case <-time.After(time.Minute):
			f.tb.Errorf("agent host %d did not exit; killed (log %s.log)", cmd.Process.Pid, base)
			_ = cmd.Process.Kill()
			<-h.exited
		}
		logf.Close()
	})
	return h
}

// do sends the host one command line and waits for its answer.
func (h *agentHost) do(line string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := fmt.Fprintln(h.in, line); err != nil {
		return err
	}
	if !h.out.Scan() {
		return fmt.Errorf("agent host %d: no answer to %q: %v", h.cmd.Process.Pid, line, h.out.Err())
	}
	if got := h.out.Text(); got != "ok "+line {
		return fmt.Errorf("agent host %d: %s", h.cmd.Process.Pid, got)
	}
	return nil
}

// do runs line on the host of machine name.
func (f *fleet) do(verb, name string) {
	f.tb.Helper()
	if err := f.hostOf[name].do(verb + " " + name); err != nil {
		f.tb.Fatal(err)
	}
}

// hostsCPU is the agent hosts' CPU time so far (/proc/PID/stat).
func (f *fleet) hostsCPU() time.Duration {
	var sum time.Duration
	for _, h := range f.hosts {
		sum += procCPU(h.cmd.Process.Pid)
	}
	return sum
}

// revision is the store's current revision.
func (f *fleet) revision(ctx context.Context) int64 {
	f.tb.Helper()
	r, err := f.st.Client().Get(ctx, "revision")
	if err != nil {
		f.tb.Fatal(err)
	}
	return r.Header.Revision
}

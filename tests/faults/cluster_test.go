package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/pkg/token"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cluster is the nodes of one scenario: node i (cp-<i+1>) lives in
// namespace i of net.
type cluster struct {
	t     *testing.T
	net   *network
	dir   string
	etcd  string // the etcd binary of the exec runtime
	token string
	nodes []*node
	// gens, when set, is the directory of the agents' exec applier
	// (generations.go): they apply generations.
	gens string
	// coordArgs are added to every coordinator's flags.
	coordArgs []string
	// embedded runs the agents' members in the agent (the embedded
	// runtime) instead of as an etcd child (the exec runtime).
	embedded bool
	// bootstrapped starts node 0's agent as a joiner through node 1 (what
	// an operator does once the bootstrap host refuses to bootstrap again).
	bootstrapped bool
	// nodeEnv, when set, is added to the environment of every process of
	// node i (clock_test.go: each node's stepped clock).
	nodeEnv func(i int) []string
}

// node is one host's processes.
type node struct {
	name  string
	agent *proc
	coord *proc
}

// proc is one process the harness started inside a namespace.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	requireRoot(t)
	bins := etcdtest.Binaries(t)
	if len(bins) == 0 {
		t.Skip("no etcd binary: set NICO_ETCD_BINARIES")
	}
	c := &cluster{t: t, net: newNetwork(t, n), dir: t.TempDir(), etcd: bins[0].Path}
	tok, err := token.Generate()
	if err != nil {
		t.Fatal(err)
	}
	c.token = filepath.Join(c.dir, "token")
	if err := os.WriteFile(c.token, []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("cp-%d", i+1)})
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) host(i int) string      { return c.net.ips[i] }
func (c *cluster) clientURL(i int) string { return "https://" + c.host(i) + ":2379" }
func (c *cluster) peerURL(i int) string   { return "https://" + c.host(i) + ":2380" }
func (c *cluster) pkiDir(i int) pki.Dir   { return pki.Dir(filepath.Join(c.dir, c.nodes[i].name, "pki")) }

func (c *cluster) endpoints() []string {
	var out []string
	for i := range c.nodes {
		out = append(out, c.clientURL(i))
	}
	return out
}

// startAgent starts node i's agent; node 0 bootstraps, the others join
// through it. env is added to the process's environment (failpoints).
func (c *cluster) startAgent(i int, env ...string) {
	c.t.Helper()
	c.nodes[i].agent = c.startAgentAs(i, c.nodes[i].name, filepath.Join(c.dir, c.nodes[i].name), env...)
}

// startAgentAs starts an agent named name with data in dataDir inside
// namespace i (a second agent of an existing name, in two-agent
// scenarios).
func (c *cluster) startAgentAs(i int, name, dataDir string, env ...string) *proc {
	c.t.Helper()
	args := []string{
		"--name", name,
		"--dataDir", dataDir,
		"--etcd.peerURL", c.peerURL(i), "--etcd.clientURL", c.clientURL(i),
		"--heartbeat.ttl", "3s", "--join.retryInterval", "300ms",
		"--tokenFile", c.token, "--join.listen", c.host(i) + ":7950", "--gossip.bind", c.host(i),
	}
	if c.embedded {
		args = append(args, "--etcd.runtime", "embedded")
	} else {
		args = append(args, "--etcd.runtime", "exec", "--etcd.binary", c.etcd)
	}
	args = append(args, c.applierArgs(i)...)
	switch {
	case i == 0 && !c.bootstrapped:
		args = append(args, "--bootstrap")
	case i == 0:
		args = append(args, "--etcd.endpoints", c.clientURL(1), "--join.endpoints", c.host(1)+":7950", "--gossip.seeds", c.host(1))
	default:
		args = append(args, "--etcd.endpoints", c.clientURL(0), "--join.endpoints", c.host(0)+":7950", "--gossip.seeds", c.host(0))
	}
	label := "agent-" + name
	if name != c.nodes[i].name {
		label += "-in-" + c.nodes[i].name
	}
	return c.spawn(i, label, filepath.Join(binDir, "nico-agent"), env, args...)
}

// startCoordinator starts node i's coordinator candidate once its agent
// has issued the coordinator certificate.
func (c *cluster) startCoordinator(i int, env ...string) {
	c.t.Helper()
	p := c.pkiDir(i)
	testwait.True(c.t, 60*time.Second, c.nodes[i].name+"'s coordinator certificate", func() bool {
		_, err := os.Stat(p.Cert(pki.CoordinatorLeaf))
		return err == nil
	})
	args := []string{
		"--name", "c-" + c.nodes[i].name,
		"--etcd.endpoints", strings.Join(c.endpoints(), ","),
		"--coordinator.sessionTTL", "2s", "--coordinator.resyncInterval", "250ms",
		"--tls.caFile", p.CACert(), "--tls.certFile", p.Cert(pki.CoordinatorLeaf), "--tls.keyFile", p.Key(pki.CoordinatorLeaf),
	}
	args = append(args, c.coordArgs...)
	c.nodes[i].coord = c.spawn(i, "coordinator-"+c.nodes[i].name, filepath.Join(binDir, "nico-coordinator"), env, args...)
}

// spawn runs path inside namespace i; ip netns exec execs it, so the pid
// is the program's own.
func (c *cluster) spawn(i int, name, path string, env []string, args ...string) *proc {
	c.t.Helper()
	logPath := filepath.Join(c.dir, fmt.Sprintf("%s.%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", c.net.ns[i], path}, args...)...)
	cmd.Env = append(childEnv(), env...)
	if c.nodeEnv != nil {
		cmd.Env = append(cmd.Env, c.nodeEnv(i)...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p
}

// exited reports whether p has exited, and its exit code.
func (p *proc) exited() (bool, int) {
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return true, ee.ExitCode()
		}
		return true, 0
	default:
		return false, 0
	}
}

func (p *proc) signal(sig syscall.Signal) error { return syscall.Kill(p.cmd.Process.Pid, sig) }

// kill9 kills p's whole process group (the agent's etcd child too, which
// has its own group: see etcdPid) and waits for it.
func (p *proc) kill9() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	p.done <- errors.New("killed")
}

// etcdPid is the pid of the etcd child of an agent.
func (p *proc) etcdPid() (int, bool) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.cmd.Process.Pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(s)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "etcd" {
				return pid, true
			}
		}
	}
	return 0, false
}

// EnvKeepLogs names a directory the processes' logs are copied to when a
// scenario ends (to read what nico did in a run that passed).
const EnvKeepLogs = "NICO_FAULTS_KEEP_LOGS"

func keepLog(t *testing.T, path string) {
	dir := os.Getenv(EnvKeepLogs)
	if dir == "" {
		return
	}
	dst := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dst, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dst, filepath.Base(path)), b, 0o644)
	}
	if err != nil {
		t.Logf("keep %s: %v", path, err)
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stopAll kills every process (etcd children first) and, on failure, logs
// the tail of each log.
func (c *cluster) stopAll() {
	for _, n := range c.nodes {
		for _, p := range []*proc{n.coord, n.agent} {
			if p == nil {
				continue
			}
			if pid, ok := p.etcdPid(); ok {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			_ = p.signal(syscall.SIGCONT)
			p.kill9()
			if c.t.Failed() {
				c.t.Logf("--- %s (%s):\n%s", p.name, p.log, tail(p.log, 25))
			}
			keepLog(c.t, p.log)
		}
	}
}

// client is an etcd client as root, through every node's endpoint.
func (c *cluster) client() *clientv3.Client {
	c.t.Helper()
	p := c.pkiDir(0)
	testwait.True(c.t, 60*time.Second, "the root certificate", func() bool {
		_, err := os.Stat(p.Cert(pki.RootLeaf))
		return err == nil
	})
	tlsCfg, err := etcdclient.Files{CA: p.CACert(), Cert: p.Cert(pki.RootLeaf), Key: p.Key(pki.RootLeaf)}.Load(c.endpoints())
	if err != nil {
		c.t.Fatal(err)
	}
	// Keepalives find a black-holed endpoint (a cut node) so the balancer
	// stops sending to it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, TLS: tlsCfg,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// waitVoters waits until the members are exactly names, all voters and
// started.
func (c *cluster) waitVoters(cli *clientv3.Client, within time.Duration, names ...string) {
	c.t.Helper()
	testwait.For(c.t, within, fmt.Sprintf("voters %v", names), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		var desc []string
		for _, m := range resp.Members {
			got[m.Name] = !m.IsLearner
			desc = append(desc, fmt.Sprintf("%s(learner=%v)", m.Name, m.IsLearner))
		}
		if len(resp.Members) != len(names) {
			return false, strings.Join(desc, " ")
		}
		for _, n := range names {
			if !got[n] {
				return false, strings.Join(desc, " ")
			}
		}
		return true, ""
	})
}

// killAgent kills node i's agent and its etcd member with SIGKILL and
// waits until both are gone (the etcd child, in its own process group,
// outlives a killed agent for a moment and holds its ports).
func (c *cluster) killAgent(i int) {
	c.t.Helper()
	a := c.nodes[i].agent
	pid, ok := a.etcdPid()
	a.kill9()
	if !ok {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	testwait.True(c.t, 30*time.Second, fmt.Sprintf("%s's etcd (pid %d) gone", c.nodes[i].name, pid), func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	})
}

// killEtcd kills node i's etcd member with SIGKILL, leaving its agent to
// restart it.
func (c *cluster) killEtcd(i int) {
	if pid, ok := c.nodes[i].agent.etcdPid(); ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// childEnv is the test's environment without NICO_* variables: nico's
// programs read those as configuration (NICO_ETCD_BINARIES would be
// etcd.binaries).
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NICO_") {
			out = append(out, kv)
		}
	}
	return out
}

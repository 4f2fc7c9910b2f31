package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// proc is one process the demo started.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

type demo struct {
	bin   string
	dir   string
	keep  bool
	procs []*proc
	token string // the join token file (tls.go)
	// ctlTLS are nicoctl's certificate flags, from copies that outlive
	// cp-1's removal (stay.go).
	ctlTLS []string
}

func newDemo(bin string, keep bool) (*demo, error) {
	for _, b := range []string{"nico-agent", "nico-coordinator", "nicoctl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("missing %s in %s: run make build", b, bin)
		}
	}
	dir, err := os.MkdirTemp("", "nico-demo-")
	if err != nil {
		return nil, err
	}
	return &demo{bin: bin, dir: dir, keep: keep}, nil
}

// Node i listens on its own loopback address, 127.0.0.(10+i).
func host(i int) string           { return fmt.Sprintf("127.0.0.%d", 10+i) }
func clientURL(i int) string      { return "https://" + host(i) + ":2379" }
func peerURL(i int) string        { return "https://" + host(i) + ":2380" }
func nodeName(i int) string       { return fmt.Sprintf("cp-%d", i) }
func (d *demo) endpoints() string { return strings.Join(d.allClientURLs(), ",") }

func (d *demo) allClientURLs() []string {
	var out []string
	for i := 1; i <= 5; i++ {
		out = append(out, clientURL(i))
	}
	return out
}

// run runs the demo under ctx; with stay set, it then leaves the cluster
// running until stay ends.
func (d *demo) run(ctx, stay context.Context) error {
	say("nico demo: five control-plane agents on loopback, mutual TLS everywhere, working dir %s", d.dir)
	if err := d.writeToken(); err != nil {
		return err
	}

	step("1. bootstrap cp-1 (it makes the cluster CA) and start a coordinator candidate on it")
	if err := d.agent(1, true); err != nil {
		return err
	}
	cli, err := d.client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := waitMembers(ctx, cli, func(ms []member) bool { return voters(ms) == 1 }); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	// Five voters: every control-plane host the demo starts (with the
	// default, three, two of them would wait as standbys).
	if err := declareVoters(ctx, cli, 5); err != nil {
		return err
	}
	if err := d.coordinator(1); err != nil {
		return err
	}
	fmt.Printf("status page of cp-1's coordinator (live while the demo runs): http://%s:9490/\n", host(1))
	// The agent registers its node object a moment after etcd starts; the
	// table names the member after its node once it has.
	if err := d.waitNodePhase(ctx, api.NodeMember, nodeName(1)); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := d.copyClientCerts(); err != nil {
		return err
	}
	d.ctl(ctx, "get", "members")

	step("2. start cp-2 .. cp-5 at once, holding only the join token; each gets its certificates from cp-1's join endpoint, then the coordinator adds them one learner at a time")
	for i := 2; i <= 5; i++ {
		if err := d.agent(i, false); err != nil {
			return err
		}
	}
	say("each change is printed as it happens, then the member table read just after it (it may already show the next step)")
	if err := d.followJoins(ctx, cli); err != nil {
		return err
	}
	say("all five are voters; waiting for their node objects to say Member and for every member to answer")
	if err := d.waitNodePhase(ctx, api.NodeMember, nodeName(1), nodeName(2), nodeName(3), nodeName(4), nodeName(5)); err != nil {
		return err
	}
	if err := waitHealthy(ctx, cli); err != nil {
		return err
	}
	for i := 2; i <= 3; i++ {
		if err := waitCert(ctx, d.pkiDir(i), pki.CoordinatorLeaf); err != nil {
			return err
		}
		if err := d.coordinator(i); err != nil {
			return err
		}
	}
	d.ctl(ctx, "get", "nodes")
	d.ctl(ctx, "status")

	step("3. roll a new generation: one node at a time, the etcd leader last after a leadership transfer")
	if err := d.rollout(ctx); err != nil {
		return err
	}

	step("4. remove two nodes, the etcd leader first: leadership moves before its member goes")
	leader, err := etcdLeader(ctx, cli)
	if err != nil {
		return err
	}
	say("the etcd leader is %s", leader)
	if err := d.ctlMust(ctx, "remove", "node", leader); err != nil {
		return err
	}
	other := "cp-5"
	if leader == other {
		other = "cp-4"
	}
	if err := d.ctlMust(ctx, "remove", "node", other); err != nil {
		return err
	}
	if err := waitMembers(ctx, cli, func(ms []member) bool { return voters(ms) == 3 && len(ms) == 3 }); err != nil {
		return fmt.Errorf("after removals: %w", err)
	}
	for _, n := range []string{leader, other} {
		if err := d.waitExit(ctx, "agent-"+n, 3); err != nil {
			return err
		}
	}
	d.ctl(ctx, "get", "members")
	d.ctl(ctx, "get", "ops")
	newLeader, err := etcdLeader(ctx, cli)
	if err != nil {
		return err
	}
	say("3 voters left; the etcd leader is now %s", newLeader)
	if stay != nil {
		d.stay(stay, cli)
	}
	return nil
}

// followJoins prints the member table each time a learner is added or
// promoted, until five voters.
func (d *demo) followJoins(ctx context.Context, cli *clientv3.Client) error {
	// What the table already showed (cp-1, a voter) is not news.
	last, _ := listMembers(ctx, cli)
	for {
		ms, err := listMembers(ctx, cli)
		if err == nil && !slices.Equal(ms, last) {
			for _, m := range ms {
				if !slices.Contains(last, m) {
					say("-> %s", m.change())
				}
			}
			last = ms
			d.ctl(ctx, "get", "members")
			if voters(ms) == 5 && len(ms) == 5 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("joins: %w (members: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *demo) agent(i int, bootstrap bool) error {
	name := nodeName(i)
	args := []string{
		"--name", name,
		"--dataDir", filepath.Join(d.dir, name),
		"--etcd.peerURL", peerURL(i),
		"--etcd.clientURL", clientURL(i),
		"--heartbeat.ttl", "5s",
		"--join.retryInterval", "500ms",
		"--tokenFile", d.token,
		"--join.listen", host(i) + ":7950",
		"--gossip.bind", host(i),
		"--metrics.listen", host(i) + ":9479", // loopback: plain HTTP (docs/monitoring.md)
	}
	args = append(args, d.applierArgs()...)
	if bootstrap {
		args = append(args, "--bootstrap")
	} else {
		args = append(args, "--etcd.endpoints", clientURL(1), "--join.endpoints", host(1)+":7950", "--gossip.seeds", host(1))
	}
	return d.spawn("agent-"+name, filepath.Join(d.bin, "nico-agent"), args...)
}

func (d *demo) coordinator(i int) error {
	args := append([]string{
		"--name", nodeName(i),
		"--etcd.endpoints", d.endpoints(),
		"--coordinator.sessionTTL", "5s",
		"--coordinator.resyncInterval", "250ms",
		"--metrics.listen", host(i) + ":9480",
		// each candidate's status page on its own loopback address (docs/statuspage.md)
		"--statusPage.listen", host(i) + ":9490",
	}, d.tlsArgs(i, pki.CoordinatorLeaf)...)
	return d.spawn("coordinator-"+nodeName(i), filepath.Join(d.bin, "nico-coordinator"), args...)
}

func (d *demo) spawn(name, path string, args ...string) error {
	logPath := filepath.Join(d.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	d.procs = append(d.procs, p)
	say("started %s (pid %d), log %s", name, cmd.Process.Pid, filepath.Base(logPath))
	return nil
}

// waitExit waits for process name to exit with code want.
func (d *demo) waitExit(ctx context.Context, name string, want int) error {
	for _, p := range d.procs {
		if p.name != name {
			continue
		}
		select {
		case err := <-p.done:
			p.done <- err
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != want {
				return fmt.Errorf("%s exited %d, want %d; log:\n%s", name, code, want, tail(p.log))
			}
			say("%s exited with code %d (node removed, data wiped)", name, code)
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s did not exit: %w", name, ctx.Err())
		}
	}
	return fmt.Errorf("no process %s", name)
}

// ctl runs nicoctl and prints its output.
func (d *demo) ctl(ctx context.Context, args ...string) {
	_ = d.ctlMust(ctx, args...)
}

func (d *demo) ctlMust(ctx context.Context, args ...string) error {
	full := append(slices.Clone(args), "--endpoints", d.endpoints())
	full = append(full, d.ctlTLS...)
	fmt.Printf("\n$ nicoctl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "nicoctl"), full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Print(out.String())
	if err != nil {
		return fmt.Errorf("nicoctl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// cleanup stops every process (SIGTERM, then SIGKILL) and removes the
// temporary directory.
func (d *demo) cleanup() error {
	for i := len(d.procs) - 1; i >= 0; i-- {
		_ = syscall.Kill(-d.procs[i].cmd.Process.Pid, syscall.SIGTERM)
	}
	var errs []error
	for _, p := range d.procs {
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("%s did not stop on SIGTERM; killed", p.name))
			<-p.done
		}
	}
	if d.keep {
		say("kept %s", d.dir)
	} else if err := os.RemoveAll(d.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func step(title string) { fmt.Printf("\n=== %s\n", title) }

// declareVoters writes the fleet's EtcdCluster asking for n voters.
func declareVoters(ctx context.Context, cli *clientv3.Client, n int) error {
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		return err
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = n
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		return fmt.Errorf("demo: declaring %d voters: %w", n, err)
	}
	return nil
}

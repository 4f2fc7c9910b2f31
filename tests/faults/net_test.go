// Package faults is nico's multi-host fault harness: every node is its own
// network namespace on a bridge the test creates, running a real agent
// (with an etcd binary as its child, the exec runtime) and a real
// coordinator candidate, built with -tags failpoints. Scenarios kill,
// pause, cut off and fail processes at named points while clients read and
// write; each checks the design's invariants, that the cluster converges,
// that the clients' history is linearizable (porcupine) and that no
// acknowledged write is lost. It needs root, ip and iptables; elsewhere it
// skips. `make test` runs the smoke scenarios, `make e2e-faults` the matrix.
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Every name the harness creates starts with namePrefix and carries the
// test process's pid, so that leftovers of a crashed run are found.
const namePrefix = "nicof"

// network is the namespaces, veths and bridge of one scenario.
type network struct {
	t      *testing.T
	id     string // <pid>x<seq>: unique per scenario
	bridge string
	hostIP string // the bridge's own address (the test's clients)
	ns     []string
	ips    []string
}

var netSeq int

// requireRoot skips unless the harness can create namespaces.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the fault harness needs root (ip netns, veth, bridge, iptables)")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the fault harness needs %s (Debian: iproute2, iptables)", tool)
		}
	}
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func must(t *testing.T, args ...string) {
	t.Helper()
	if err := run(args...); err != nil {
		t.Fatal(err)
	}
}

// newNetwork makes n namespaces on a fresh bridge, node i at
// 10.234.<s>.<i+1>/24; the bridge itself is 10.234.<s>.254.
func newNetwork(t *testing.T, n int) *network {
	t.Helper()
	cleanLeftovers(t)
	netSeq++
	pid := os.Getpid()
	w := &network{t: t, id: fmt.Sprintf("%dx%d", pid, netSeq)}
	// Linux names are at most 15 bytes: keep the bridge's short.
	w.bridge = fmt.Sprintf("nfb%dx%d", pid, netSeq)
	subnet := fmt.Sprintf("10.234.%d", (pid+netSeq)%250)
	w.hostIP = subnet + ".254"
	t.Cleanup(w.close)
	must(t, "ip", "link", "add", w.bridge, "type", "bridge")
	must(t, "ip", "addr", "add", w.hostIP+"/24", "dev", w.bridge)
	must(t, "ip", "link", "set", w.bridge, "up")
	// Bridged frames may pass the host's FORWARD chain (br_netfilter).
	_ = run("iptables", "-I", "FORWARD", "-i", w.bridge, "-o", w.bridge, "-j", "ACCEPT")
	for i := range n {
		ns := fmt.Sprintf("%s%s-%d", namePrefix, w.id, i)
		host, peer := fmt.Sprintf("nfv%dx%d-%d", pid%100000, netSeq, i), fmt.Sprintf("nfp%d", i)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		must(t, "ip", "netns", "add", ns)
		w.ns, w.ips = append(w.ns, ns), append(w.ips, ip)
		must(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
		must(t, "ip", "link", "set", host, "master", w.bridge)
		must(t, "ip", "link", "set", host, "up")
		must(t, "ip", "netns", "exec", ns, "ip", "addr", "add", ip+"/24", "dev", peer)
		must(t, "ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")
		must(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	}
	return w
}

func (w *network) close() {
	for _, ns := range w.ns {
		delNamespace(ns)
	}
	_ = run("iptables", "-D", "FORWARD", "-i", w.bridge, "-o", w.bridge, "-j", "ACCEPT")
	_ = run("ip", "link", "del", w.bridge)
}

// cleanLeftovers deletes the namespaces and bridges of harness runs whose
// process is gone (a crashed or killed test).
func cleanLeftovers(t *testing.T) {
	out, _ := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if pid, ok := ownerPid(strings.TrimPrefix(name, "nfb")); strings.HasPrefix(name, "nfb") && ok && !alive(pid) {
			t.Logf("removing bridge %s left by pid %d", name, pid)
			_ = run("iptables", "-D", "FORWARD", "-i", name, "-o", name, "-j", "ACCEPT")
			_ = run("ip", "link", "del", name)
		}
	}
	out, _ = exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], namePrefix) {
			continue
		}
		if pid, ok := ownerPid(strings.TrimPrefix(f[0], namePrefix)); ok && !alive(pid) {
			t.Logf("removing namespace %s left by pid %d", f[0], pid)
			delNamespace(f[0])
		}
	}
}

// ownerPid reads the pid from "<pid>x...".
func ownerPid(rest string) (int, bool) {
	p, _, ok := strings.Cut(rest, "x")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// cut drops every packet in and out of node i (both directions).
func (w *network) cut(i int) {
	w.t.Helper()
	must(w.t, "ip", "netns", "exec", w.ns[i], "iptables", "-A", "INPUT", "!", "-i", "lo", "-j", "DROP")
	must(w.t, "ip", "netns", "exec", w.ns[i], "iptables", "-A", "OUTPUT", "!", "-o", "lo", "-j", "DROP")
}

// cutOneWay drops what node i receives from node j; i still sends to j.
func (w *network) cutOneWay(i, j int) {
	w.t.Helper()
	must(w.t, "ip", "netns", "exec", w.ns[i], "iptables", "-A", "INPUT", "-s", w.ips[j], "-j", "DROP")
}

// heal removes every rule the faults added.
func (w *network) heal() {
	w.t.Helper()
	for _, ns := range w.ns {
		must(w.t, "ip", "netns", "exec", ns, "iptables", "-F")
	}
}

// delNamespace kills every process left in ns, then deletes it.
func delNamespace(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = run("ip", "netns", "del", ns)
}

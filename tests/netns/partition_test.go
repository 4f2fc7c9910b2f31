// Package netns runs the gossip mesh across network namespaces (ip netns,
// veth pairs, a bridge) and cuts one node off with iptables DROP. It needs
// root, ip and iptables: `make test-netns`; elsewhere it skips.
package netns

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/testwait"
)

// event is one line a helper prints: a peer's state as its mesh sees it.
type event struct {
	Peer  string    `json:"peer"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
}

// TestHelperProcess is the mesh member run inside a namespace; it is not a
// test of its own.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("NICO_NETNS_HELPER") != "1" {
		t.Skip("helper process for TestPartition")
	}
	var seeds []string
	if s := os.Getenv("NICO_SEED"); s != "" {
		seeds = []string{s}
	}
	m, err := gossip.New(gossip.Config{Name: os.Getenv("NICO_NAME"), BindAddr: os.Getenv("NICO_BIND"), BindPort: gossip.DefaultPort,
		Seeds: seeds, Profile: gossip.ProfileLAN, Token: []byte("netns-token")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = m.Run(ctx) }()
	seen := map[string]gossip.State{}
	enc := json.NewEncoder(os.Stdout)
	// It reports every change it sees until the test kills it.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		for _, n := range m.Nodes() {
			if seen[n.Name] != n.State {
				seen[n.Name] = n.State
				_ = enc.Encode(event{Peer: n.Name, State: string(n.State), Since: n.Since})
			}
		}
	}
}

// net is the namespaces, veths and bridge of one test.
type netw struct {
	t      *testing.T
	bridge string
	ns     []string
	ips    []string
}

func sh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newNet(t *testing.T, n int) *netw {
	id := os.Getpid() % 100000
	w := &netw{t: t, bridge: fmt.Sprintf("nbr%d", id)}
	t.Cleanup(w.close)
	sh(t, "ip", "link", "add", w.bridge, "type", "bridge")
	sh(t, "ip", "link", "set", w.bridge, "up")
	// Bridged frames may pass the host's FORWARD chain (br_netfilter).
	_ = exec.Command("iptables", "-I", "FORWARD", "-i", w.bridge, "-o", w.bridge, "-j", "ACCEPT").Run()
	for i := range n {
		ns, host, peer := fmt.Sprintf("nico%d-%d", id, i), fmt.Sprintf("nv%d-%d", id, i), fmt.Sprintf("np%d-%d", id, i)
		ip := fmt.Sprintf("10.231.%d.%d", id%250, i+1)
		sh(t, "ip", "netns", "add", ns)
		w.ns, w.ips = append(w.ns, ns), append(w.ips, ip)
		sh(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
		sh(t, "ip", "link", "set", peer, "netns", ns)
		sh(t, "ip", "link", "set", host, "master", w.bridge)
		sh(t, "ip", "link", "set", host, "up")
		sh(t, "ip", "netns", "exec", ns, "ip", "addr", "add", ip+"/24", "dev", peer)
		sh(t, "ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")
		sh(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	}
	return w
}

func (w *netw) close() {
	for _, ns := range w.ns {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("iptables", "-D", "FORWARD", "-i", w.bridge, "-o", w.bridge, "-j", "ACCEPT").Run()
	_ = exec.Command("ip", "link", "del", w.bridge).Run()
}

// observer collects the events one helper prints.
type observer struct {
	mu     sync.Mutex
	states map[string]event
	log    []event
}

func (o *observer) state(peer string) event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.states[peer]
}

// startHelper runs a mesh member named name in namespace i.
func (w *netw) startHelper(i int, name, seed string) *observer {
	w.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", w.ns[i], os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "NICO_NETNS_HELPER=1", "NICO_NAME="+name, "NICO_BIND="+w.ips[i], "NICO_SEED="+seed)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	o := &observer{states: map[string]event{}}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				o.mu.Lock()
				o.states[e.Peer] = e
				o.log = append(o.log, e)
				o.mu.Unlock()
			}
		}
	}()
	return o
}

// TestPartition: four members in four namespaces on one bridge; n3 is cut
// off with iptables DROP. The coordinator's member (n0) sees it suspect,
// then dead; while it is suspect the planner starts no membership change;
// healing the cut brings it back alive.
func TestPartition(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the netns partition test needs root (ip netns, veth, bridge, iptables): run `sudo make test-netns`")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the netns partition test needs %s (Debian: iproute2, iptables; .ci/deps.sh installs them)", tool)
		}
	}
	w := newNet(t, 4)
	seed := w.ips[0] + ":7946"
	obs := w.startHelper(0, "n0", "")
	for i := 1; i < 4; i++ {
		w.startHelper(i, fmt.Sprintf("n%d", i), seed)
	}
	testwait.True(t, 60*time.Second, "n0 to see n1..n3 alive", func() bool {
		for i := 1; i < 4; i++ {
			if obs.state(fmt.Sprintf("n%d", i)).State != "alive" {
				return false
			}
		}
		return true
	})

	cut := time.Now()
	sh(t, "ip", "netns", "exec", w.ns[3], "iptables", "-A", "INPUT", "-j", "DROP")
	sh(t, "ip", "netns", "exec", w.ns[3], "iptables", "-A", "OUTPUT", "-j", "DROP")
	testwait.True(t, 60*time.Second, "n0 to see n3 suspect", func() bool { return obs.state("n3").State == "suspect" })
	suspect := obs.state("n3")
	t.Logf("n3 suspect %s after the cut", suspect.Since.Sub(cut).Round(time.Millisecond))

	// While n3 is suspect, a pending join does not start: the observed
	// state goes through the coordinator's combination with a live lease.
	live := func(e event) map[string]membership.Liveness {
		return map[string]membership.Liveness{"n3": membership.CombineLiveness(membership.Signals{Gossip: e.State, GossipSince: e.Since, LeaseLive: true, LeaseSince: cut})}
	}
	world := plannerWorld(live(suspect))
	if s := membership.Plan(world, membership.DefaultPolicy, time.Now()); s.Action != membership.Wait || !strings.Contains(s.Reason, "n3 is suspect") {
		t.Fatalf("planner while n3 is suspect: %s, want Wait", s)
	}

	testwait.True(t, 60*time.Second, "n0 to see n3 dead", func() bool { return obs.state("n3").State == "dead" })
	t.Logf("n3 dead %s after the cut", obs.state("n3").Since.Sub(cut).Round(time.Millisecond))
	if !obs.state("n3").Since.After(suspect.Since) {
		t.Fatalf("n3 dead at %s, not after suspect at %s", obs.state("n3").Since, suspect.Since)
	}
	// Dead, n3 no longer blocks as a suspect (it counts against quorum).
	if s := membership.Plan(plannerWorld(live(obs.state("n3"))), membership.DefaultPolicy, time.Now()); strings.Contains(s.Reason, "suspect") {
		t.Fatalf("planner once n3 is dead: %s", s)
	}

	sh(t, "ip", "netns", "exec", w.ns[3], "iptables", "-F")
	healed := time.Now()
	testwait.True(t, 90*time.Second, "n0 to see n3 alive again", func() bool { return obs.state("n3").State == "alive" })
	t.Logf("n3 alive %s after healing", time.Since(healed).Round(time.Millisecond))
	// Only n3 was cut off: n1 and n2 are alive (on a loaded machine the
	// fast profile may flap one for a moment, so this waits, not peeks).
	for _, n := range []string{"n1", "n2"} {
		testwait.True(t, 30*time.Second, "n0 to see "+n+" alive (only n3 was cut off)", func() bool { return obs.state(n).State == "alive" })
	}
}

// plannerWorld is three voters on n1..n3 and a pending join of n9.
func plannerWorld(live map[string]membership.Liveness) membership.Observed {
	// spec.voters 5: n9 would grow the cluster (with 3, it is a standby).
	o := membership.Observed{Alive: map[string]bool{}, Liveness: live, Cluster: api.EtcdClusterSpec{Voters: 5}}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		peer := fmt.Sprintf("https://10.0.0.%d:2380", i)
		o.Members = append(o.Members, membership.Member{ID: api.MemberID(i), Name: name, Node: name, PeerURLs: []string{peer},
			ClientURLs: []string{fmt.Sprintf("https://10.0.0.%d:2379", i)}, Healthy: true, Leader: i == 1})
		n := api.NewNode(name)
		n.Spec.PeerURL = peer
		o.Nodes = append(o.Nodes, n)
		o.Alive[name] = true
	}
	n := api.NewNode("n9")
	n.Spec.PeerURL = "https://10.0.0.9:2380"
	o.Nodes = append(o.Nodes, n)
	o.Alive["n9"] = true
	j := api.NewJoinRequest("n9")
	j.Spec = api.JoinRequestSpec{Node: "n9", PeerURL: n.Spec.PeerURL, ClientURL: "https://10.0.0.9:2379", Attempt: 1}
	o.Joins = append(o.Joins, j)
	return o
}

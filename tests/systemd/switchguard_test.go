package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/linearkv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestParallelSwitchesTakeTheSlotOneAtATime: on the fleet as it grows, a
// switch is held by a join in flight, a data-plane host switches without
// waiting and a failed switch gives its slot back at its hold
// (holdsAndGivesBack). Then the three control-plane hosts
// receive a generation that restarts their agent, and so their etcd
// member (hosts.nix cpN-switched: changed agent settings), and all three
// switch at once, as colmena would: each runs its new generation's
// pre-switch checks the way switch-to-configuration runs them (the script
// system.preSwitchChecks makes, with the toplevel and "switch"), then
// switches. The switches run one at a time (their Switch operations'
// journals never overlap), every check is granted, every slot comes back
// once the host's restarted agent reports its member healthy. Three
// clients reading and writing throughout see a linearizable history
// (porcupine, tests/linearkv) with no acknowledged write lost, and quorum,
// sampled throughout, never drops (some sample sees a member down). It
// logs each host's wait for its slot and the clients' longest stall.
func TestParallelSwitchesTakeTheSlotOneAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")
	mustStart(ctx, t, cp1, "nico-agent.service")
	mustStart(ctx, t, cp1, "nico-coordinator.service")
	cp2 := c.boot(ctx, "cp2")
	mustStart(ctx, t, cp2, "nico-agent.service")
	w1 := c.boot(ctx, "w1")
	mustStart(ctx, t, w1, "nico-agent.service")
	wantVoters(ctx, t, cp1, "cp1", "cp2")
	newClient := c.rootClients(ctx, cp1)
	cli := newClient()
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// A switch held by cp3's join, w1's switch not held, a slot back at
	// its hold; it leaves cp1..cp3 voters.
	holdsAndGivesBack(ctx, t, c, st)
	hosts := []*guest{cp1, cp2, c.guests["cp3"]}

	// Three clients writing and reading throughout (porcupine-checked),
	// and quorum sampled.
	wctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	hist, waitClients := linearkv.Run(wctx, func() *clientv3.Client { return newClient() }, 3, 33, 20*time.Millisecond)
	q := &quorumSampler{cli: newClient(), dial: func(ep string) *clientv3.Client { return newClient(ep) }, interval: 250 * time.Millisecond}
	sampled := make(chan struct{})
	go func() { defer close(sampled); q.run(wctx) }()

	type result struct {
		host   string
		waited time.Duration
		out    string
		err    error
	}
	granted := make(chan result, len(hosts))
	start := time.Now()
	for _, g := range hosts {
		next := g.Name + "-switched"
		top := "/nix/store/" + strings.Repeat("5", 32) + "-nixos-system-" + next
		g.installClosure(ctx, next, top)
		script := c.fx.Hosts[next].PreSwitchCheck
		go func() {
			out, err := g.Exec(ctx, "bash", script, top, "switch")
			granted <- result{host: g.Name, waited: time.Since(start), out: string(out), err: err}
		}()
	}
	var waits []string
	for range hosts {
		r := <-granted
		if r.err != nil {
			t.Fatalf("%s's pre-switch check failed after %v: %v\n%s", r.host, r.waited, r.err, r.out)
		}
		waits = append(waits, fmt.Sprintf("%s %v", r.host, r.waited.Round(100*time.Millisecond)))
		t.Logf("%s granted after %v:\n%s", r.host, r.waited.Round(100*time.Millisecond), r.out)
		g := c.guests[r.host]
		g.switchTo(ctx, r.host+"-switched")
		top := "/nix/store/" + strings.Repeat("5", 32) + "-nixos-system-" + r.host + "-switched"
		if out, err := g.Exec(ctx, "ln", "-sfn", top, "/run/current-system"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	cp1.waitFor(ctx, "every switch released", func() error {
		for _, g := range hosts {
			r := &api.SwitchRequest{}
			if err := st.Get(ctx, store.SwitchKey(g.Name), r); err != nil {
				return err
			}
			if r.Status.Phase != api.SwitchReleased {
				return fmt.Errorf("%w: %s is %s: %s", errNotYet, g.Name, r.Status.Phase, r.Status.Message)
			}
		}
		return nil
	})
	total := time.Since(start)
	stopClients()
	<-sampled
	h := waitClients()

	ops, _, err := store.List[api.Operation](ctx, st, store.OpsDir)
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		node     string
		from, to time.Time
	}
	var spans []span
	for _, op := range ops {
		if op.Spec.Type != api.OpSwitch || len(op.Status.History) == 0 || op.Status.History[0].At.Before(start) {
			continue // not one of these three switches (cp2's that expired before)
		}
		if op.Status.Phase != api.OpSucceeded {
			t.Errorf("switch %s: %s: %s", op.Metadata.Name, op.Status.Phase, op.Status.Message)
		}
		h := op.Status.History
		spans = append(spans, span{op.Spec.Node, h[0].At, h[len(h)-1].At})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	if len(spans) != 3 {
		t.Fatalf("%d switch operations, want 3: %+v", len(spans), spans)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].from.Before(spans[i-1].to) {
			t.Fatalf("%s's switch started at %s, before %s's ended at %s", spans[i].node, spans[i].from, spans[i-1].node, spans[i-1].to)
		}
	}
	v := linearkv.Check(t, newClient(), h, filepath.Join(t.TempDir(), "history.html"))
	samples, degraded, downs, least, breaches := q.report()
	t.Logf("three hosts switched at once: waited for the slot %s; all released %v after the start; "+
		"the clients made %d calls (%d failed or unknown), linearizable %s, %d acknowledged lost, longest stall %v; "+
		"quorum sampled %d times, %d with a voter down (samples by voter: %v), fewest healthy voters %d",
		strings.Join(waits, ", "), total.Round(100*time.Millisecond), v.Ops, v.Failed, v.Linearizable, len(v.Lost),
		v.Stall.Round(time.Millisecond), samples, degraded, downs, least)
	if v.Ops == 0 || hist.Acked() == 0 {
		t.Error("the clients had no write acknowledged")
	}
	if v.Linearizable != porcupine.Ok {
		t.Errorf("the clients' history is %s, not linearizable", v.Linearizable)
	}
	if len(v.Lost) > 0 {
		t.Errorf("%d acknowledged writes lost: %v", len(v.Lost), v.Lost[:min(len(v.Lost), 10)])
	}
	// A member's restart here takes a few seconds (its stop, etcd's
	// start, the catch-up); the clients, on every endpoint, should wait
	// at most for the leader's move or one call's timeout (2 s).
	if v.Stall > 10*time.Second {
		t.Errorf("the clients stalled %v, longer than a member's restart", v.Stall.Round(time.Millisecond))
	}
	if len(breaches) > 0 {
		t.Errorf("quorum lost in %d samples:\n%s", len(breaches), strings.Join(breaches, "\n"))
	}
	if degraded == 0 {
		t.Errorf("no sample of %d saw a member down: the switches restarted none, or the sampler cannot see one", samples)
	}
}

// installClosure copies host next's store files into g's store, as
// copying a generation's closure does before its switch, and makes its
// toplevel.
func (g *guest) installClosure(ctx context.Context, next, top string) {
	t := g.t
	t.Helper()
	root := fmt.Sprintf("/proc/%d/root", g.PID)
	for p, f := range hostFiles(t, next) {
		if !strings.HasPrefix(p, "/nix/store/") {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(root+p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+p, f.Data, f.Mode); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(root+top, 0o755); err != nil {
		t.Fatal(err)
	}
}

// rootClients makes etcd clients of the guests' cluster with root's
// certificate of g's pki, from the test's own namespace on the bridge;
// each call of the function it returns is a new client, of the given
// endpoints or, with none, of cp1..cp3's.
func (c *cluster) rootClients(ctx context.Context, g *guest) func(endpoints ...string) *clientv3.Client {
	t := c.t
	t.Helper()
	if err := c.bridge.Join("10.233.0.254/24"); err != nil {
		t.Fatal(err)
	}
	pkiDir := fmt.Sprintf("/proc/%d/root/var/lib/nico/pki", g.PID)
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "root.crt", "root.key"} {
		b, err := os.ReadFile(filepath.Join(pkiDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var eps []string
	for _, n := range []string{"cp1", "cp2", "cp3"} {
		eps = append(eps, "https://"+c.fx.Hosts[n].Address+":2379")
	}
	tlsCfg, err := etcdclient.Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "root.crt"), Key: filepath.Join(dir, "root.key")}.Load(eps)
	if err != nil {
		t.Fatal(err)
	}
	return func(endpoints ...string) *clientv3.Client {
		if len(endpoints) == 0 {
			endpoints = eps
		}
		cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
}

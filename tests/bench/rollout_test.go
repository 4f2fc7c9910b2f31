package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagRollCP      = flag.Int("nico.roll.cp", 5, "control-plane nodes of the rollout benchmark")
	flagRollDP      = flag.Int("nico.roll.dp", 20, "data-plane nodes of the rollout benchmark")
	flagRollApply   = flag.Duration("nico.roll.apply", 200*time.Millisecond, "how long each node's exec apply takes")
	flagRollRestart = flag.Bool("nico.roll.restart", true, "control-plane applies restart the node's etcd member first, as a switch that changes etcd.service does")
)

// BenchmarkRollout rolls one generation across 5 control-plane and 20
// data-plane nodes whose exec applier takes 200 ms (sleep 0.2), with a
// client writing every 10 ms throughout. It reports the rollout's overhead
// (its wall time minus the sum of the nodes' apply times, as each agent
// recorded them) per node, and the writes that failed and the longest stall
// during the control-plane part, where each node's apply first restarts its
// etcd member (stop, start with its data), as switch-to-configuration does
// when etcd.service changed; -nico.roll.restart=false leaves the members
// alone.
func BenchmarkRollout(b *testing.B) {
	cps, dps := *flagRollCP, *flagRollDP
	f := newRollBenchFleet(b, cps, dps)
	cli := etcdtest.Dial(b, pki.RootIdentity, time.Second, f.Endpoints()...)
	defer cli.Close()
	wctx, stopWriter := context.WithCancel(b.Context())
	writes := make(chan []write, 1)
	go func() { writes <- writeLoop(wctx, cli) }()

	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	r := api.NewRollout("bench")
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "v2"}
	t0 := time.Now()
	if err := f.st.Create(ctx, store.RolloutKey("bench"), r); err != nil {
		b.Fatal(err)
	}
	for r.Status.Phase != api.RolloutSucceeded {
		select {
		case <-ctx.Done():
			b.Fatalf("rollout did not finish: %v (phase %s, %s)", ctx.Err(), r.Status.Phase, r.Status.Message)
		case <-time.After(20 * time.Millisecond):
		}
		got := &api.Rollout{}
		if err := f.st.Get(ctx, store.RolloutKey("bench"), got); err == nil {
			r = got
		}
		if r.Status.Phase == api.RolloutHalted {
			b.Fatalf("rollout halted at %s: %s", r.Status.HaltedNode, r.Status.HaltedReason)
		}
	}
	wall := time.Since(t0)
	stopWriter()
	ws := <-writes

	var applySum time.Duration
	var cpFrom, cpTo time.Time
	var pickup, notice, next []time.Duration
	var prevDone time.Time
	var cpLines strings.Builder
	// In the order the nodes rolled (the etcd leader last).
	order := slices.Clone(r.Status.Nodes)
	slices.SortFunc(order, func(a, b api.NodeProgress) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, p := range order {
		c := &api.NixosConfiguration{}
		if err := f.st.Get(ctx, store.NixosConfigKey(p.Name), c); err != nil {
			b.Fatal(err)
		}
		h := c.Status.History[len(c.Status.History)-1]
		applySum += h.Finished.Sub(h.Started)
		pickup = append(pickup, h.Started.Sub(p.StartedAt))
		notice = append(notice, p.FinishedAt.Sub(h.Finished))
		gap := p.StartedAt.Sub(prevDone)
		if !prevDone.IsZero() {
			next = append(next, gap)
		}
		prevDone = p.FinishedAt
		if p.ControlPlane {
			fmt.Fprintf(&cpLines, "  %s: written %s after the previous step was done, agent started %s later, applied (member restart included) in %s, marked done %s later\n", p.Name,
				gap.Round(time.Millisecond), h.Started.Sub(p.StartedAt).Round(time.Millisecond), h.Finished.Sub(h.Started).Round(time.Millisecond), p.FinishedAt.Sub(h.Finished).Round(time.Millisecond))
			if cpFrom.IsZero() || p.StartedAt.Before(cpFrom) {
				cpFrom = p.StartedAt
			}
			if p.FinishedAt.After(cpTo) {
				cpTo = p.FinishedAt
			}
		}
	}
	n := len(r.Status.Nodes)
	overhead := wall - applySum
	cp := stats(ws, cpFrom, cpTo)
	all := stats(ws, t0, t0.Add(wall))
	var t table
	t.add("nodes", "wall ms", "sum of applies ms", "overhead ms", "overhead/node ms")
	t.add(n, wall, applySum, overhead, time.Duration(int64(overhead)/int64(n)))
	t.add("", "", "", "", "")
	t.add("overhead stage", "p50 ms", "max ms", "", "")
	for _, st := range []struct {
		name string
		ds   []time.Duration
	}{{"step written -> agent starts", pickup}, {"agent reports -> leader marks done", notice}, {"done -> next step written", next}} {
		sm := summarize(st.ds)
		t.add(st.name, sm.p50, sm.max, "", "")
	}
	var w table
	w.add("part", "secs", "writes", "failed", "max stall", "p50", "p99", "max")
	w.add("control plane", fmt.Sprintf("%.1f", cpTo.Sub(cpFrom).Seconds()), cp.attempts, cp.failed, cp.maxStall, cp.lat.p50, cp.lat.p99, cp.lat.max)
	w.add("whole rollout", fmt.Sprintf("%.1f", wall.Seconds()), all.attempts, all.failed, all.maxStall, all.lat.p50, all.lat.p99, all.lat.max)
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: %d control-plane + %d data-plane nodes, exec apply %s each (control plane: etcd member restarted first: %v), data plane 1 at a time\n", b.Name(), cps, dps, *flagRollApply, *flagRollRestart)
	out.WriteString(t.String())
	out.WriteString("control-plane steps:\n" + cpLines.String())
	fmt.Fprintf(&out, "a Put every %s (timeout %s) during the rollout, times in ms:\n", writeEvery, writeTimeout)
	out.WriteString(w.String())
	fmt.Print(out.String())
	b.ReportMetric(ms(overhead)/float64(n), "overhead-ms/node")
	b.ReportMetric(ms(wall), "rollout-ms")
	b.ReportMetric(float64(cp.failed), "cp-failed-writes")
	b.ReportMetric(ms(cp.maxStall), "cp-max-stall-ms")
}

// newRollBenchFleet starts cps control-plane agents (the first bootstraps)
// and dps data-plane agents, all with an exec applier that sleeps, and one
// coordinator; it returns once every member is a voter and every node has
// applied generation 1 (a first rollout, not measured).
func newRollBenchFleet(b *testing.B, cps, dps int) *fleet {
	secs := fmt.Sprintf("%.3f", flagRollApply.Seconds())
	withApplier := func(cfg agent.Config) agent.Config {
		x, err := apply.NewExec(apply.ExecConfig{Command: []string{"sleep", secs}, Gate: apply.Gate{Interval: 50 * time.Millisecond}})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Applier = x
		return cfg
	}
	startCP := func(f *fleet, cfg agent.Config) *node {
		cfg = withApplier(cfg)
		if !*flagRollRestart {
			return f.Start(cfg)
		}
		rt := newRestarting(fleetkit.EmbeddedRuntime())
		cfg.Applier = restartApplier{rt: rt, next: cfg.Applier}
		return f.StartWith(cfg, rt)
	}
	f := bootFleet(b, "c-1", func(f *fleet) *node { return startCP(f, f.AgentConfig("cp-01", true)) })
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	for i := 2; i <= cps; i++ {
		startCP(f, f.AgentConfig(fmt.Sprintf("cp-%02d", i), false))
	}
	f.WaitVoterCount(5*time.Minute, cps)
	for i := 1; i <= dps; i++ {
		cfg := f.AgentConfig(fmt.Sprintf("dp-%02d", i), false)
		cfg.Roles = []api.Role{api.RoleWorker}
		f.Start(withApplier(cfg))
	}
	// Every node registered and alive, then a first generation everywhere.
	for {
		hb, err := f.st.Client().Get(ctx, store.HeartbeatsDir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && int(hb.Count) == cps+dps {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("nodes not all alive: %v", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	warm := api.NewRollout("warm-up")
	warm.Metadata.CreatedAt = time.Now()
	warm.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "v1"}
	warm.Spec.MaxUnavailable = "100%"
	if err := f.st.Create(ctx, store.RolloutKey("warm-up"), warm); err != nil {
		b.Fatal(err)
	}
	for warm.Status.Phase != api.RolloutSucceeded {
		select {
		case <-ctx.Done():
			b.Fatalf("warm-up rollout: %v (%s)", ctx.Err(), warm.Status.Message)
		case <-time.After(100 * time.Millisecond):
		}
		got := &api.Rollout{}
		if err := f.st.Get(ctx, store.RolloutKey("warm-up"), got); err == nil {
			warm = got
		}
	}
	return f
}

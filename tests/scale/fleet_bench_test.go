package scale

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagSizes    = flag.String("nico.scale.sizes", "100,300,1000", "fleet sizes BenchmarkFleetScale measures")
	flagIdle     = flag.Duration("nico.scale.idle", 30*time.Second, "how long each fleet idles while measured (reported per minute)")
	flagApply    = flag.Duration("nico.scale.apply", 3*time.Second, "how long each machine's apply takes in the rollouts")
	flagChanges  = flag.Int("nico.scale.changes", 4, "membership changes measured (machines joining, then as many leaving)")
	flagRollouts = flag.Int("nico.scale.rollouts", 3, "rollouts of the whole fleet measured one after another (their median is reported)")
)

// BenchmarkFleetScale measures, for each fleet size N: the registration of
// N machines from nothing; the store's write rate, the requests etcd
// serves, and the coordinator's and the agents' CPU while the fleet idles;
// the coordinator's cost per membership change; and data-plane rollouts
// over the N machines at maxUnavailable 10 % against their ideal (N /
// batch × the apply time), the median of -nico.scale.rollouts, then one
// with machines joining and leaving while it runs.
//
//	go test -count=1 -run '^$' -bench FleetScale -benchtime 1x -timeout 60m ./tests/scale/
func BenchmarkFleetScale(b *testing.B) {
	if *flagRollouts < 1 {
		b.Fatalf("-nico.scale.rollouts: %d rollouts: want at least 1", *flagRollouts)
	}
	bins := etcdtest.Binaries(b)
	bin := bins[len(bins)-1]
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				measureFleet(b, bin, n)
			}
		})
	}
}

func sizes(tb testing.TB) []int {
	var out []int
	for _, s := range strings.Split(*flagSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			tb.Fatalf("-nico.scale.sizes: %q is not a size: want positive numbers separated by commas", s)
		}
		out = append(out, n)
	}
	return out
}

func measureFleet(b *testing.B, bin etcdtest.Binary, n int) {
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	f := newFleet(ctx, b, bin, n)

	// Registration: every machine's Node in the store, Registered.
	reg := f.watchNodes(ctx)
	f.startHosts(ctx, *flagApply)
	last := reg.wait(ctx, b, f.names, registered)
	registration := last.Sub(f.started)
	b.Logf("N=%d: %d machines registered in %s (%d agent hosts)", n, n, registration.Round(time.Millisecond), len(f.hosts))
	b.ReportMetric(registration.Seconds(), "s/register-all")
	b.ReportMetric(float64(n)/registration.Seconds(), "machines/s")

	// Idle: the fleet does nothing; heartbeats keep their leases.
	f.quiet(ctx, b)
	m := f.startMeter(ctx)
	<-time.After(*flagIdle)
	idle := f.stopMeter(ctx, m)
	perMin := time.Minute.Seconds() / idle.wall.Seconds()
	b.Logf("N=%d idle %s: coordinator cpu %s, %d allocs, %d KiB; agents cpu %s; %d store revisions; %.0f etcd requests",
		n, idle.wall.Round(time.Millisecond), idle.cpu, idle.allocs, idle.bytes/1024, idle.agentsCPU, idle.revisions, idle.requests)
	b.ReportMetric(idle.cpu.Seconds()*1000*perMin, "coord-cpu-ms/idle-min")
	b.ReportMetric(float64(idle.allocs)*perMin, "coord-allocs/idle-min")
	b.ReportMetric(idle.agentsCPU.Seconds()*1000*perMin/float64(n), "agent-cpu-ms/machine/idle-min")
	b.ReportMetric(float64(idle.revisions)*perMin, "revisions/idle-min")
	b.ReportMetric(idle.requests*perMin/float64(n), "etcd-requests/machine/idle-min")
	b.Logf("N=%d idle writes by key: %v", n, f.writesByDir(ctx, b, m.rev, m.rev+idle.revisions))

	// Membership changes: spares join, then as many machines leave.
	k := min(*flagChanges, spares)
	m = f.startMeter(ctx)
	joined := f.watchNodes(ctx)
	for _, name := range f.spare[:k] {
		f.do("start", name)
	}
	joined.wait(ctx, b, f.spare[:k], registered)
	for _, name := range f.names[:k] {
		f.do("stop", name) // returns once its heartbeat lease is revoked
	}
	// The coordinator's answer to the last change comes within its
	// resync interval (1 s) and settle; the window covers it.
	<-time.After(2 * time.Second)
	ch := f.stopMeter(ctx, m)
	net := max(0, ch.cpu-time.Duration(float64(idle.cpu)*ch.wall.Seconds()/idle.wall.Seconds()))
	netAllocs := max(0, float64(ch.allocs)-float64(idle.allocs)*ch.wall.Seconds()/idle.wall.Seconds())
	changes := 2 * k
	b.Logf("N=%d %d membership changes in %s: coordinator cpu %s (%s above idle), %d allocs", n, changes, ch.wall.Round(time.Millisecond), ch.cpu, net, ch.allocs)
	b.ReportMetric(net.Seconds()*1000/float64(changes), "coord-cpu-ms/change")
	b.ReportMetric(netAllocs/float64(changes), "coord-allocs/change")

	// Data-plane rollouts at maxUnavailable 10 %, over the machines still
	// running, one after another; the figures are their median.
	running := append(append([]string{}, f.names[k:]...), f.spare[:k]...)
	var walls []time.Duration
	var ideal1 time.Duration
	for i := range *flagRollouts {
		name := fmt.Sprintf("r1-%d", i+1)
		wall, batch, r1 := f.rolloutRecord(ctx, b, name, "v1-"+strconv.Itoa(i+1), running, nil)
		ideal1 = ideal(len(running), batch)
		walls = append(walls, wall)
		// One line a rollout: a benchmark's log keeps its first ten.
		sp := spans(r1)
		b.Logf("N=%d rollout %s of %d machines, %d at a time: %s; ideal %s; ratio %.3f. Its nodes (median and slowest): %s; from their start to their finish median %s, 90th percentile %s, slowest %s (the apply takes %s); %.1f of %d applying at a time on average",
			n, name, len(running), batch, wall.Round(time.Millisecond), ideal1, wall.Seconds()/ideal1.Seconds(),
			f.phases(ctx, b, r1), sp.median.Round(time.Millisecond), sp.p90.Round(time.Millisecond), sp.max.Round(time.Millisecond), *flagApply, sp.width, batch)
	}
	slices.Sort(walls)
	wall := walls[len(walls)/2]
	b.Logf("N=%d rollouts' median: %s; ratio %.3f (of %d: %v)", n, wall.Round(time.Millisecond), wall.Seconds()/ideal1.Seconds(), len(walls), walls)
	b.ReportMetric(wall.Seconds(), "s/rollout")
	b.ReportMetric(wall.Seconds()/ideal1.Seconds(), "rollout/ideal")

	// The same while a machine joins the fleet and another leaves it. The
	// one that leaves is not among the rollout's machines: a machine of a
	// rollout that goes down holds its turn up to the step timeout and
	// then halts the rollout (pkg/rollout's downStep), which is what an
	// operator asked for, not a cost of the fleet's size.
	leaving := running[len(running)-1]
	rolled := running[:len(running)-1]
	during := func() {
		f.do("start", f.spare[k])
		f.do("stop", leaving)
	}
	wall2, batch2 := f.rollout(ctx, b, "r2", "v2", rolled, during)
	ideal2 := ideal(len(rolled), batch2)
	b.Logf("N=%d rollout of %d machines while one joins and one leaves: %s; ideal %s; ratio %.3f", n, len(rolled), wall2.Round(time.Millisecond), ideal2, wall2.Seconds()/ideal2.Seconds())
	b.ReportMetric(wall2.Seconds()/ideal2.Seconds(), "rollout-with-change/ideal")
}

// ideal is a rollout's wall time if every batch took exactly the apply
// time and nothing else.
func ideal(n, batch int) time.Duration {
	return time.Duration(math.Ceil(float64(n)/float64(batch))) * *flagApply
}

// rollout rolls revision over names at maxUnavailable 10 % and waits for
// it to succeed; during, when set, runs once the rollout has started. It
// returns the wall time from the Rollout's creation to its success and
// the batch size.
func (f *fleet) rollout(ctx context.Context, tb testing.TB, name, revision string, names []string, during func()) (time.Duration, int) {
	wall, batch, _ := f.rolloutRecord(ctx, tb, name, revision, names, during)
	return wall, batch
}

// rolloutRecord is rollout, returning the finished Rollout too.
func (f *fleet) rolloutRecord(ctx context.Context, tb testing.TB, name, revision string, names []string, during func()) (time.Duration, int, *api.Rollout) {
	tb.Helper()
	r := api.NewRollout(name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: revision}
	r.Spec.Nodes = names
	r.Spec.MaxUnavailable = "10%"
	r.Spec.StepTimeout = api.Duration(5 * time.Minute)
	batch, err := r.Spec.BatchSize(len(names))
	if err != nil {
		tb.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rev := f.revision(ctx)
	w := f.st.Client().Watch(wctx, store.RolloutKey(name), clientv3.WithRev(rev+1))
	t0 := time.Now()
	if err := f.st.Create(ctx, store.RolloutKey(name), r); err != nil {
		tb.Fatal(err)
	}
	if during != nil {
		during()
	}
	for resp := range w {
		for _, ev := range resp.Events {
			got := &api.Rollout{}
			if err := json.Unmarshal(ev.Kv.Value, got); err != nil {
				tb.Fatal(err)
			}
			switch got.Status.Phase {
			case api.RolloutSucceeded:
				return time.Since(t0), batch, got
			case api.RolloutHalted:
				tb.Fatalf("rollout %s %s at %s: %s", name, got.Status.Phase, got.Status.HaltedNode, got.Status.HaltedReason)
			}
		}
	}
	tb.Fatalf("rollout %s: %v", name, ctx.Err())
	return 0, 0, nil
}

// nodeWatch follows the Nodes from the revision it was made at.
type nodeWatch struct {
	w clientv3.WatchChan
}

func (f *fleet) watchNodes(ctx context.Context) nodeWatch {
	rev := f.revision(ctx)
	return nodeWatch{w: f.st.Client().Watch(ctx, store.NodesDir, clientv3.WithPrefix(), clientv3.WithRev(rev+1))}
}

// wait returns when the last of names has a Node cond holds for: when
// the event that made it so arrived.
func (nw nodeWatch) wait(ctx context.Context, tb testing.TB, names []string, cond func(*api.Node) bool) time.Time {
	tb.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for resp := range nw.w {
		if err := resp.Err(); err != nil {
			tb.Fatal(err)
		}
		for _, ev := range resp.Events {
			if ev.Type != mvccpb.PUT {
				continue
			}
			nd := &api.Node{}
			if err := json.Unmarshal(ev.Kv.Value, nd); err != nil {
				tb.Fatal(err)
			}
			if want[nd.Metadata.Name] && cond(nd) {
				delete(want, nd.Metadata.Name)
			}
		}
		if len(want) == 0 {
			return time.Now()
		}
	}
	tb.Fatalf("%d machines never registered (%v)", len(want), ctx.Err())
	return time.Time{}
}

func (f *fleet) startMeter(ctx context.Context) meter {
	a, by := fleetkit.HeapAllocs()
	return meter{t0: time.Now(), cpu: fleetkit.ProcessCPU(), agents: f.hostsCPU(), allocs: a, bytes: by, rev: f.revision(ctx), requests: f.served()}
}

// served is the client requests the etcd members served so far.
func (f *fleet) served() float64 {
	n, err := f.requests.total()
	if err != nil {
		f.tb.Fatalf("etcd's request counts: %v", err)
	}
	return n
}

func (f *fleet) stopMeter(ctx context.Context, m meter) cost {
	a, by := fleetkit.HeapAllocs()
	return cost{wall: time.Since(m.t0), cpu: fleetkit.ProcessCPU() - m.cpu, agentsCPU: f.hostsCPU() - m.agents,
		allocs: a - m.allocs, bytes: by - m.bytes, revisions: f.revision(ctx) - m.rev, requests: f.served() - m.requests}
}

// phases splits a finished rollout's nodes' times into the step's start
// to the agent's start (the configuration's write, its watch, the agent's
// read and Applying mark), the apply, and the agent's finish to the step
// that recorded the node done (the report's write, the coordinator's
// watch, settle and pass), from each configuration's generation record.
func (f *fleet) phases(ctx context.Context, tb testing.TB, r *api.Rollout) string {
	cfgs, _, err := store.List[api.NixosConfiguration](ctx, f.st, store.NixosConfigsDir)
	if err != nil {
		tb.Fatal(err)
	}
	byName := map[string]*api.NixosConfiguration{}
	for _, c := range cfgs {
		byName[c.Metadata.Name] = c
	}
	var pickup, apply, notice []time.Duration
	for _, p := range r.Status.Nodes {
		c := byName[p.Name]
		if c == nil || p.FinishedAt.IsZero() {
			continue
		}
		for _, rec := range c.Status.History {
			if rec.Generation == p.Generation {
				pickup = append(pickup, rec.Started.Sub(p.StartedAt))
				apply = append(apply, rec.Finished.Sub(rec.Started))
				notice = append(notice, p.FinishedAt.Sub(rec.Finished))
			}
		}
	}
	part := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		slices.Sort(ds)
		return fmt.Sprintf("%s, %s", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	return fmt.Sprintf("step to the agent's start %s; apply %s; the agent's finish to the step that recorded it %s", part(pickup), part(apply), part(notice))
}

// nodeSpans are a finished rollout's nodes' times from the step that
// started each to the one that recorded it done, and how many applied at
// once on average over the rollout (their sum over its span).
type nodeSpans struct {
	median, p90, max time.Duration
	width            float64
}

func spans(r *api.Rollout) nodeSpans {
	var ds []time.Duration
	var first, end time.Time
	var sum time.Duration
	for _, p := range r.Status.Nodes {
		if p.StartedAt.IsZero() || p.FinishedAt.IsZero() {
			continue
		}
		d := p.FinishedAt.Sub(p.StartedAt)
		ds, sum = append(ds, d), sum+d
		if first.IsZero() || p.StartedAt.Before(first) {
			first = p.StartedAt
		}
		if p.FinishedAt.After(end) {
			end = p.FinishedAt
		}
	}
	if len(ds) == 0 {
		return nodeSpans{}
	}
	slices.Sort(ds)
	return nodeSpans{median: ds[len(ds)/2], p90: ds[len(ds)*9/10], max: ds[len(ds)-1], width: sum.Seconds() / end.Sub(first).Seconds()}
}

// writesByDir counts the store's writes (puts and deletes) between
// revisions from and to by the directory of their key (its first path
// element).
func (f *fleet) writesByDir(ctx context.Context, tb testing.TB, from, to int64) map[string]int {
	tb.Helper()
	out := map[string]int{}
	if to <= from {
		return out
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range f.st.Client().Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := resp.Err(); err != nil {
			tb.Fatal(err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > to {
				return out
			}
			dir, _, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), "/"), "/")
			out[dir]++
			if ev.Kv.ModRevision == to {
				return out
			}
		}
	}
	return out
}

// registered holds for a machine's Node once its agent registered it.
func registered(nd *api.Node) bool { return nd.Status.Phase == api.NodeRegistered }

// quiet waits until the store takes no write for a second: the agents'
// writes on their way in (each names its heartbeat lease in its Node
// once it has one) are done.
func (f *fleet) quiet(ctx context.Context, tb testing.TB) {
	tb.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := f.revision(ctx)
	for {
		select {
		case <-ctx.Done():
			tb.Fatalf("the store never went quiet: %v", ctx.Err())
		case <-tick.C:
		}
		rev := f.revision(ctx)
		if rev == last {
			return
		}
		last = rev
	}
}

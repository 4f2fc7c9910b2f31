package bench

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagClusters     = flag.Int("nico.clusters", 50, "KubernetesClusters BenchmarkClusterPlanning runs")
	flagClusterFleet = flag.Int("nico.clusterfleet", 1000, "machines of the fleet BenchmarkClusterPlanning's clusters are taken from")
	flagClusterIdle  = flag.Duration("nico.clusteridle", 30*time.Second, "how long BenchmarkClusterPlanning watches the idle store (reported per minute)")
	flagPasses       = flag.Int("nico.passes", 10, "steady passes of the cluster controller BenchmarkClusterPlanning measures")
)

// Each cluster's machines: control plane, then data plane.
const (
	clusterCP = 3
	clusterDP = 2
)

// BenchmarkClusterPlanning runs the real coordinator (its real PKI
// secrets hook on a secret box) over -nico.clusters KubernetesClusters of
// 3 control-plane and 2 data-plane machines each, taken from a fleet of
// -nico.clusterfleet machines, with this harness playing their agents:
// each applies the configuration its cluster's rollout gives it and, on
// a control-plane machine, reports its components healthy after the
// apply and, as agents do, again only when a report is ReportRefresh old
// (agent/componentprobes.go). Once every
// cluster is Ready it measures the idle store with the production
// resync (revisions per minute by key directory, the database size),
// then, under a coordinator that passes only when asked, the CPU and
// allocations of one steady pass of the cluster controller over all the
// clusters (woken by an unchanged rewrite of one cluster), beside the
// controller's own read of its inputs with a plain client (the floor).
// A steady pass that writes is logged with the keys it wrote.
//
//	go test -count=1 -run '^$' -bench ClusterPlanning -benchtime 1x ./tests/bench/
func BenchmarkClusterPlanning(b *testing.B) {
	for range b.N {
		clusterPlanning(b)
	}
}

// agents plays the cluster machines' agents.
type agents struct {
	st *store.Store
	// cp maps each control-plane machine to its cluster, lead each
	// cluster to the machine whose components hold the leases.
	cp, lead map[string]string
	mu       sync.Mutex
	// reported is the generation each machine last reported after,
	// written when its report was last written.
	reported map[string]int64
	written  map[string]time.Time
	reports  int
}

// apply applies every pending configuration and reports the control-plane
// machines that applied a new one.
func (a *agents) apply(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cfgs, _, err := store.List[api.NixosConfiguration](ctx, a.st, store.NixosConfigsDir)
	if err != nil {
		return err
	}
	for _, cfg := range cfgs {
		name := cfg.Metadata.Name
		if cfg.Settled() == api.GenerationPending {
			now := time.Now().UTC()
			cfg.Status.Generation, cfg.Status.Attempt, cfg.Status.Phase = cfg.Spec.Generation, cfg.Spec.Attempt, api.GenerationApplied
			cfg.Status.AppliedGeneration, cfg.Status.UpdatedAt = cfg.Spec.Generation, now
			cfg.RecordGeneration(api.GenerationRecord{Generation: cfg.Spec.Generation, Phase: api.GenerationApplied, Started: now, Finished: now})
			if err := a.st.UpdateObject(ctx, cfg); err != nil {
				return fmt.Errorf("agent %s: %w", name, err)
			}
		}
		if cl, ok := a.cp[name]; ok && cfg.Status.AppliedGeneration > 0 && a.reported[name] != cfg.Status.AppliedGeneration && kubeplan.OwnedBy(cfg.Metadata.OwnerReferences, cl) {
			if err := a.report(ctx, name, cl); err != nil {
				return err
			}
			a.reported[name] = cfg.Status.AppliedGeneration
		}
	}
	return nil
}

// report writes machine's component report: every component healthy,
// the first control-plane machine holding the leases.
func (a *agents) report(ctx context.Context, machine, cluster string) error {
	r := api.NewComponentReport(machine)
	r.Status.Cluster, r.Status.CheckedAt = cluster, time.Now().UTC()
	r.Status.FreshUntil = r.Status.CheckedAt.Add(agent.ReportRefresh + 3*probeInterval)
	a.written[machine] = r.Status.CheckedAt
	lead := a.lead[cluster] == machine
	for _, c := range []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
		r.Status.Components = append(r.Status.Components, api.ComponentHealth{Name: c, Healthy: true, HoldsLease: lead && c != api.ComponentAPIServer})
	}
	a.reports++
	return a.st.PutObject(ctx, r)
}

// probeInterval is spec.probes.interval's default.
const probeInterval = 10 * time.Second

// probe is a round of every control-plane machine's probes: each finds
// its components as its report says, and writes the report again only
// when it is ReportRefresh old.
func (a *agents) probe(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range slices.Sorted(maps.Keys(a.reported)) {
		if time.Since(a.written[m]) < agent.ReportRefresh {
			continue
		}
		if err := a.report(ctx, m, a.cp[m]); err != nil {
			return err
		}
	}
	return nil
}

// run applies on every change of a configuration until ctx ends.
func (a *agents) run(ctx context.Context, tb testing.TB) {
	wch := a.st.Client().Watch(ctx, store.NixosConfigsDir, clientv3.WithPrefix())
	for {
		if err := a.apply(ctx); err != nil && ctx.Err() == nil {
			tb.Errorf("agents: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-wch:
			if !ok {
				return
			}
		}
	}
}

// clusterName names cluster c.
func clusterName(c int) string { return fmt.Sprintf("k-%02d", c) }

func clusterPlanning(b *testing.B) {
	ctx, cancel := context.WithTimeout(b.Context(), 25*time.Minute)
	defer cancel()
	nc, fleetN := *flagClusters, *flagClusterFleet
	per := clusterCP + clusterDP
	if nc*per > fleetN-controlPlane {
		b.Fatalf("-nico.clusters %d needs %d machines, the fleet has %d", nc, nc*per, fleetN)
	}
	ec := etcdtest.StartWith(b, etcdtest.Options{Members: 1})
	cli := etcdtest.NewClient(b, ec.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	ca := etcdtest.PKI(b)
	// The fleet's control plane keeps its configuration; the clusters'
	// machines (from controlPlane on) have none until their rollout.
	fillFleet(ctx, b, st, fleetShape{n: fleetN, bare: controlPlane + nc*per, generations: 4, ca: ca, now: time.Now().UTC()})
	ag := &agents{st: st, cp: map[string]string{}, lead: map[string]string{}, reported: map[string]int64{}, written: map[string]time.Time{}}
	for c := range nc {
		kc := api.NewKubernetesCluster(clusterName(c))
		kc.Spec.Version = "1.37.2"
		for k := range per {
			m := fleetMachine(controlPlane + c*per + k)
			if k < clusterCP {
				kc.Spec.ControlPlane.Machines = append(kc.Spec.ControlPlane.Machines, m)
				ag.cp[m] = kc.Metadata.Name
				if k == 0 {
					ag.lead[kc.Metadata.Name] = m
				}
			} else {
				kc.Spec.DataPlane.Machines = append(kc.Spec.DataPlane.Machines, m)
			}
		}
		if err := st.PutObject(ctx, kc); err != nil {
			b.Fatal(err)
		}
	}
	key, err := secretbox.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		b.Fatal(err)
	}
	hooks := coordinator.ClusterHooks{DefaultGitRepo: "https://git.example/kube",
		Secrets: &coordinator.KubePKISecrets{Secrets: secrets.New(st, box), Store: st, Root: cli, NicoCA: ca}}
	actx, stopAgents := context.WithCancel(ctx)
	agentsDone := make(chan struct{})
	go func() { defer close(agentsDone); ag.run(actx, b) }()
	defer func() { stopAgents(); <-agentsDone }()

	// Converge and idle under the production settings.
	co, stopCo := runCoordinator(ctx, b, st, hooks, coordinator.Config{Name: "c-1", SessionTTL: 10 * time.Second, ResyncInterval: time.Second, Settle: coordinator.DefaultSettle})
	t0 := time.Now()
	lastProbe := time.Now()
	testwait.For(b, 20*time.Minute, "every cluster Ready", func() (bool, string) {
		if time.Since(lastProbe) > 5*time.Second {
			if err := ag.probe(ctx); err != nil {
				b.Fatal(err)
			}
			lastProbe = time.Now()
		}
		kcs, _, err := store.List[api.KubernetesCluster](ctx, st, store.ClustersDir)
		if err != nil {
			b.Fatal(err)
		}
		ready, phases := 0, map[api.ClusterPhase]int{}
		for _, kc := range kcs {
			phases[kc.Status.Phase]++
			if kc.Status.Phase == api.ClusterReady {
				ready++
			}
		}
		return ready == nc, fmt.Sprintf("%d of %d Ready: %v", ready, nc, phases)
	})
	converged := time.Since(t0)

	idle := idleStore(ctx, b, st, co, ag)
	status, err := cli.Status(ctx, ec.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	stopCo()

	// Steady passes, each asked for.
	co, stopCo = runCoordinator(ctx, b, st, hooks, coordinator.Config{Name: "c-2", SessionTTL: 10 * time.Second, ResyncInterval: time.Hour})
	defer stopCo()
	if err := ag.probe(ctx); err != nil {
		b.Fatal(err)
	}
	nudge := nudger(ctx, b, st, co)
	testwait.For(b, time.Minute, "the new leader's first cluster pass", func() (bool, string) {
		h := clusterHealth(co)
		return h.Reconciles > 0 && h.State != controller.Reconciling, fmt.Sprintf("%d passes, %s", h.Reconciles, h.State)
	})
	settled := false
	for range 20 {
		if written := nudge(); len(written) == 0 {
			settled = true
			break
		}
	}
	if !settled {
		b.Fatalf("the cluster controller still writes after 20 passes: %v", nudge())
	}
	passes := max(*flagPasses, 1)
	rev0, _ := st.Revision(ctx)
	m := startMeter()
	var written []string
	for range passes {
		written = append(written, nudge()...)
	}
	pass := m.stop()
	rev1, _ := st.Revision(ctx)
	ops := fleetReadOps()
	m = startMeter()
	for range passes {
		if _, err := st.Client().Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	floor := m.stop()
	if len(written) > 0 {
		b.Logf("FINDING: steady passes wrote %d keys: %v", len(written), written)
	}
	n := float64(passes)
	perMin := time.Minute.Seconds() / idle.wall.Seconds()
	b.ReportMetric(pass.cpu.Seconds()*1000/n, "cpu-ms/pass")
	b.ReportMetric(float64(pass.allocs)/n, "allocs/pass")
	b.ReportMetric(float64(pass.bytes)/n/1024, "KiB/pass")
	b.ReportMetric(pass.wall.Seconds()*1000/n, "wall-ms/pass")
	b.ReportMetric(floor.cpu.Seconds()*1000/n, "cpu-ms/read-floor")
	b.ReportMetric(float64(floor.allocs)/n, "allocs/read-floor")
	b.ReportMetric(float64(len(written))/n, "writes/pass")
	b.ReportMetric(float64(status.DbSize)/(1<<20), "MiB-db")
	b.ReportMetric(float64(status.DbSizeInUse)/(1<<20), "MiB-db-in-use")
	b.ReportMetric(float64(idle.revs)*perMin, "revs/idle-min")
	b.ReportMetric(float64(idle.coordRevs)*perMin, "coord-revs/idle-min")
	b.ReportMetric(float64(idle.passes)*perMin, "passes/idle-min")
	b.ReportMetric(idle.cpu.Seconds()*1000*perMin, "cpu-ms/idle-min")
	b.ReportMetric(converged.Seconds(), "s/converge")
	b.Logf("%d clusters of %d+%d machines in a fleet of %d: Ready in %s; steady pass cpu %.1f ms, %d allocs, %.0f KiB, wall %.1f ms (its inputs' read alone: cpu %.1f ms, %d allocs; x%.1f), %d revisions in %d passes (%d nudges); idle %s: %d revisions (%d by the coordinator: %v; agents' probes %v), %d cluster passes, cpu %s; db %.1f MiB (%.1f in use)",
		nc, clusterCP, clusterDP, fleetN, converged.Round(time.Second), pass.cpu.Seconds()*1000/n, pass.allocs/uint64(passes), float64(pass.bytes)/n/1024, pass.wall.Seconds()*1000/n,
		floor.cpu.Seconds()*1000/n, floor.allocs/uint64(passes), ratio(pass.cpu, floor.cpu), rev1-rev0, passes, passes,
		idle.wall.Round(time.Second), idle.revs, idle.coordRevs, idle.byDir, idle.agentDirs, idle.passes, idle.cpu.Round(time.Millisecond),
		float64(status.DbSize)/(1<<20), float64(status.DbSizeInUse)/(1<<20))
}

// runCoordinator runs one candidate with hooks until the returned stop.
func runCoordinator(ctx context.Context, b *testing.B, st *store.Store, hooks coordinator.ClusterHooks, cfg coordinator.Config) (*coordinator.Coordinator, func()) {
	b.Helper()
	cfg.Clusters = hooks
	co := coordinator.New(cfg, st, benchLogger(b))
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- co.Run(cctx) }()
	var once sync.Once
	return co, func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		})
	}
}

// clusterHealth is the cluster controller's record on co.
func clusterHealth(co *coordinator.Coordinator) controller.Health {
	for _, h := range co.Health() {
		if h.Name == "kubernetes-clusters" && h.Running {
			return h
		}
	}
	return controller.Health{}
}

// nudger returns a function that wakes the cluster controller with an
// unchanged rewrite of the first cluster, waits for its pass to end and
// returns the keys written meanwhile but the rewrite.
func nudger(ctx context.Context, b *testing.B, st *store.Store, co *coordinator.Coordinator) func() []string {
	key := store.ClusterKey(clusterName(0))
	return func() []string {
		kv, err := st.GetKV(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		before := clusterHealth(co).Reconciles
		put, err := st.Client().Put(ctx, key, string(kv.Value))
		if err != nil {
			b.Fatal(err)
		}
		rev := put.Header.Revision
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			h := clusterHealth(co)
			if h.Reconciles > before && h.State != controller.Reconciling {
				break
			}
			select {
			case <-ctx.Done():
				b.Fatal("no cluster pass after a nudge")
			case <-tick.C:
			}
		}
		resp, err := st.Client().Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithMinModRev(rev+1), clientv3.WithKeysOnly())
		if err != nil {
			b.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}
}

// fleetReadOps are the reads the cluster controller's pass starts with
// (coordinator/kubernetescluster_observe.go readClusterFleet).
func fleetReadOps() []clientv3.Op {
	var ops []clientv3.Op
	for _, d := range []string{store.ClustersDir, store.NodesDir, store.MachinesDir, store.HeartbeatsDir, store.ClusterClaimsDir, store.NixosConfigsDir,
		store.RolloutsDir, store.ComponentReportsDir, store.DrainRequestsDir, store.KubeconfigReportsDir, store.ClaimsDir} {
		ops = append(ops, clientv3.OpGet(d, clientv3.WithPrefix()))
	}
	return append(ops, clientv3.OpGet(store.LivenessKey), clientv3.OpGet(store.EtcdClusterKey))
}

// idle is what the store saw while the fleet idled.
type idle struct {
	cost
	revs, coordRevs int64
	byDir           map[string]int
	agentDirs       map[string]int
	passes          uint64
}

// idleStore watches every key for -nico.clusteridle while the agents
// probe each interval, and counts the revisions by key directory.
func idleStore(ctx context.Context, b *testing.B, st *store.Store, co *coordinator.Coordinator, ag *agents) idle {
	rev0, err := st.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := st.Client().Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev0+1))
	out := idle{byDir: map[string]int{}, agentDirs: map[string]int{}}
	passes0 := clusterHealth(co).Reconciles
	m := startMeter()
	end := time.After(*flagClusterIdle)
	probe := time.NewTicker(probeInterval)
	defer probe.Stop()
	seen := map[int64]bool{}
	for done := false; !done; {
		select {
		case <-end:
			done = true
		case <-probe.C:
			if err := ag.probe(ctx); err != nil {
				b.Fatal(err)
			}
		case resp := <-wch:
			for _, ev := range resp.Events {
				dir, _, _ := strings.Cut(string(ev.Kv.Key), "/")
				if !seen[ev.Kv.ModRevision] {
					seen[ev.Kv.ModRevision] = true
					if dir == strings.TrimSuffix(store.ComponentReportsDir, "/") {
						out.agentDirs[dir]++
					} else {
						out.byDir[dir]++
						out.coordRevs++
					}
				}
			}
		}
	}
	out.cost = m.stop()
	rev1, err := st.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	out.revs = rev1 - rev0
	out.passes = clusterHealth(co).Reconciles - passes0
	return out
}

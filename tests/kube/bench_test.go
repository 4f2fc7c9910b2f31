package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkClusterReady measures, three times each and interleaved, on the
// sandbox's five machines (three control-plane, two data-plane running
// real workers: containerd and a kubelet each):
//
//   - apply-to-ready: from nicoctl apply of a KubernetesCluster (etcd
//     provider nico) to its phase Ready, as the store's watch shows it,
//     which it reaches once every Node is Ready: machine selection and
//     claims, the PKI, the etcd identity, the cluster's Rollout (control
//     plane first), each control-plane machine starting a real
//     kube-apiserver, controller-manager and scheduler with the delivered
//     files, the component probes, the bootstrap token registered, each
//     worker's kubelet joining (its CSR approved and signed) and its Node
//     Ready, the kubeconfig;
//   - baseline: the same machines running the same generation with no
//     cluster controller: a Rollout (control plane first) of cluster.nix
//     and the files delivered inline, a bootstrap kubeconfig among them
//     (standaloneSpec), and, from the Rollout's write, its driver
//     registering the bootstrap token as soon as the API server answers
//     (what kubeadm init does); from the write until every Node is Ready.
//
// It reports both medians and their difference. Each cluster is deleted
// (nicoctl delete cluster --wait) and each baseline released before the
// next run; neither is timed. Every run after the first reuses the workers
// the run before released (their kubelets join the new cluster anew).
func BenchmarkClusterReady(b *testing.B) {
	kubetest.FindBinaries(b) // skips (or fails) before the nicoctl build
	dps := []string{"dp-1", "dp-2"}
	if !kubetest.InNetns(b, "BenchmarkClusterReady", workerAddrs(dps)...) {
		return
	}
	nicoctl := nicoctlBin(b)
	f := newFleet(b, fleetOptions{cps: 3, dps: len(dps), clusters: true, workers: true})
	ctl := f.nicoctl(nicoctl)
	ctx, cancel := context.WithTimeout(b.Context(), 25*time.Minute)
	defer cancel()
	const runs = 3
	var base, ready []time.Duration
	for i := range runs {
		name := fmt.Sprintf("base-%d", i)
		sa, err := f.standaloneSpec(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		took, err := f.standaloneReady(ctx, name, sa, dps)
		if err != nil {
			b.Fatal(err)
		}
		base = append(base, took)
		if err := f.release(ctx, name+"-release"); err != nil {
			b.Fatal(err)
		}

		cluster := fmt.Sprintf("k%d", i)
		file := filepath.Join(f.dir, cluster+".yaml")
		writeFileTB(b, file, clusterYAML(cluster, "1.37.2"))
		t0 := time.Now()
		if out, err := ctl(ctx, "apply", "-f", file); err != nil {
			b.Fatalf("nicoctl apply: %v\n%s", err, out)
		}
		f.waitClusterTB(b, ctx, cluster, 5*time.Minute, func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady })
		ready = append(ready, time.Since(t0))
		nodes, err := f.adminClient(b, ctx, cluster).Nodes(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range dps {
			if !nodes[m].Ready {
				b.Fatalf("%s Ready, its Node %s %+v", cluster, m, nodes[m])
			}
		}
		b.Logf("run %d: baseline %s, apply to Ready %s; %s", i, took.Round(time.Millisecond), ready[i].Round(time.Millisecond), f.rolloutSpans(ctx, cluster, t0))
		if out, err := ctl(ctx, "delete", "cluster", cluster, "--wait"); err != nil {
			b.Fatalf("nicoctl delete cluster: %v\n%s", err, out)
		}
	}
	mb, mr := median(base), median(ready)
	b.ReportMetric(mr.Seconds(), "apply-to-ready-s")
	b.ReportMetric(mb.Seconds(), "baseline-s")
	// What the cluster controller adds over the bare generation; it can
	// come out negative: the cluster rolls its control plane and its data
	// plane as two rollouts, the baseline all five machines in one.
	b.ReportMetric((mr - mb).Seconds(), "ready-minus-baseline-s")
}

// rolloutSpans says when, after t0, each machine of cluster's rollouts
// started and finished its step: where apply-to-ready's time goes.
func (f *fleet) rolloutSpans(ctx context.Context, cluster string, t0 time.Time) string {
	ros, _, err := store.List[api.Rollout](ctx, f.st, store.RolloutsDir)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, r := range ros {
		if !strings.HasPrefix(r.Metadata.Name, cluster+"-") {
			continue
		}
		spans := []string{r.Metadata.Name + fmt.Sprintf(" from %.1fs:", r.Status.StartedAt.Sub(t0).Seconds())}
		for _, p := range r.Status.Nodes {
			end := "on"
			if !p.FinishedAt.IsZero() {
				end = fmt.Sprintf("%.1fs", p.FinishedAt.Sub(t0).Seconds())
			}
			spans = append(spans, fmt.Sprintf("%s %.1fs-%s", p.Name, p.StartedAt.Sub(t0).Seconds(), end))
		}
		out = append(out, strings.Join(spans, " "))
	}
	return strings.Join(out, "; ")
}

// standaloneReady is the baseline's run: it writes the Rollout of sa over
// every machine, registers sa's bootstrap token as soon as the API server
// answers, and returns the time from the write until the Rollout succeeded
// and the Nodes of workers are Ready.
func (f *fleet) standaloneReady(ctx context.Context, name string, sa standalone, workers []string) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	reg := make(chan error, 1)
	go func() { reg <- sa.registerToken(rctx, name) }()
	if _, err := f.rollAndWait(ctx, name, sa.Spec, 5*time.Minute); err != nil {
		cancel()
		<-reg
		return 0, err
	}
	if err := <-reg; err != nil {
		return 0, err
	}
	admin, err := kubeapi.FromKubeconfig(sa.Admin)
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	err = testwait.Until(rctx, clockwork.NewRealClock(), 5*time.Minute, 100*time.Millisecond, func() (bool, string) {
		nodes, err := admin.Nodes(rctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range workers {
			if !nodes[m].Ready {
				return false, fmt.Sprintf("Node %s: %+v", m, nodes[m])
			}
		}
		return true, ""
	})
	if err != nil {
		return 0, fmt.Errorf("%s: every Node Ready: %w", name, err)
	}
	return time.Since(t0), nil
}

// BenchmarkWorkerRollout measures a worker's time in a rolling update
// against the same roll done by hand, three times each and interleaved,
// on the rolling-update test's cluster (newWorkerCluster: one
// control-plane machine, three real workers, the Deployment web with its
// PodDisruptionBudget):
//
//   - rollout: a gitRepo change of cluster k1 rolled by nico; a worker's
//     time is its Rollout's record from the start of its drain (cordon)
//     to its end (switched, Node Ready, uncordoned);
//   - baseline: the same change over the same workers with the
//     coordinator stopped (no nico controller), one at a time by a plain
//     loop of client calls (bareRoll): cordon, evict its pods until none
//     is left, switch its NixosConfiguration, wait for the generation
//     applied, the Node Ready and its kubelet heard from since the switch
//     (the rollout's gate), uncordon; a worker's time is from its
//     cordon to its uncordon. The coordinator, started again, rolls the
//     workers back to the cluster's generation (not timed).
//
// It reports the medians per worker and the ratio of rollout to baseline.
func BenchmarkWorkerRollout(b *testing.B) {
	kubetest.FindBinaries(b)
	dps := []string{"dp-1", "dp-2", "dp-3"}
	if !kubetest.InNetns(b, "BenchmarkWorkerRollout", workerAddrs(dps)...) {
		return
	}
	ctx, cancel := context.WithTimeout(b.Context(), 9*time.Minute)
	defer cancel()
	f, admin, _ := newWorkerCluster(b, ctx, 1, dps)
	const runs = 3
	var base, roll, baseSpan, rollSpan []time.Duration
	for i := range runs {
		repo := fmt.Sprintf("https://git.example/kube-run-%d", i)
		w := f.watchRollouts(ctx)
		f.changeCluster(b, ctx, "k1", func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = repo })
		f.waitRolled(b, ctx, "k1", 3*time.Minute, "run "+fmt.Sprint(i), func(s api.NixosConfigurationSpec) bool { return s.GitRepo == repo })
		took, span := w.stop(b, dps)
		roll, rollSpan = append(roll, took...), append(rollSpan, span/time.Duration(len(dps)))

		f.coord()
		<-f.done
		var bare []time.Duration
		t0 := time.Now()
		for _, m := range dps {
			bare = append(bare, f.bareRoll(b, ctx, admin, m, func(s *api.NixosConfigurationSpec) { s.GitRepo = repo + "-bare" }))
		}
		loop := time.Since(t0).Round(time.Millisecond)
		base, baseSpan = append(base, bare...), append(baseSpan, loop/time.Duration(len(dps)))
		f.startCoordinator(fleetOptions{clusters: true, workers: true})
		f.waitRolled(b, ctx, "k1", 3*time.Minute, "back to the cluster's generation", func(s api.NixosConfigurationSpec) bool { return s.GitRepo == repo })
		b.Logf("run %d: per worker, rollout %v (whole roll %s), baseline %v (whole loop %s)", i, took, span, bare, loop)
	}
	mr, mb := median(roll), median(base)
	b.ReportMetric(mr.Seconds(), "rollout-s/node")
	b.ReportMetric(mb.Seconds(), "baseline-s/node")
	b.ReportMetric(mr.Seconds()/mb.Seconds(), "rollout/baseline")
	// The whole roll over the number of workers: the time between two
	// workers' rolls counted too.
	sr, sb := median(rollSpan), median(baseSpan)
	b.ReportMetric(sr.Seconds(), "rollout-whole-s/node")
	b.ReportMetric(sb.Seconds(), "baseline-whole-s/node")
	b.ReportMetric(sr.Seconds()/sb.Seconds(), "whole-rollout/baseline")
}

// rolloutWatch records, from the Rollouts' changes, each worker's time
// from its drain's start to its end (a cluster's Rollouts are deleted
// once done, so they are watched, not read after).
type rolloutWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	span   map[string][2]time.Time // drain start, end
}

func (f *fleet) watchRollouts(ctx context.Context) *rolloutWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &rolloutWatch{cancel: cancel, span: map[string][2]time.Time{}}
	ch := f.st.Client().Watch(ctx, store.RolloutsDir, clientv3.WithPrefix())
	w.wg.Go(func() {
		for resp := range ch {
			for _, ev := range resp.Events {
				r := &api.Rollout{}
				if ev.Type != clientv3.EventTypePut || store.Decode(ev.Kv, r) != nil {
					continue
				}
				w.mu.Lock()
				for _, p := range r.Status.Nodes {
					if p.Phase == api.NodeDone && !p.DrainStartedAt.IsZero() {
						w.span[p.Name] = [2]time.Time{p.DrainStartedAt, p.FinishedAt}
					}
				}
				w.mu.Unlock()
			}
		}
	})
	return w
}

// stop waits until every one of workers has a time, stops watching and
// returns their times and the span from the first drain's start to the
// last worker's end.
func (w *rolloutWatch) stop(tb testing.TB, workers []string) ([]time.Duration, time.Duration) {
	tb.Helper()
	defer w.wg.Wait()
	defer w.cancel()
	var out []time.Duration
	var first, last time.Time
	testwait.For(tb, 30*time.Second, "every worker's drained roll recorded", func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		out = out[:0]
		for _, m := range workers {
			sp, ok := w.span[m]
			if !ok {
				return false, fmt.Sprintf("recorded: %v", w.span)
			}
			out = append(out, sp[1].Sub(sp[0]).Round(time.Millisecond))
			if first.IsZero() || sp[0].Before(first) {
				first = sp[0]
			}
			if sp[1].After(last) {
				last = sp[1]
			}
		}
		return true, ""
	})
	return out, last.Sub(first).Round(time.Millisecond)
}

// bareRoll rolls worker m by hand with client calls: cordon its Node,
// evict its pods through the eviction API (again while a
// PodDisruptionBudget refuses) until none is left, switch its
// NixosConfiguration (set, the generation raised), wait for the agent to
// apply it and the Node Ready, uncordon. It returns the time from the
// cordon to the uncordon.
func (f *fleet) bareRoll(tb testing.TB, ctx context.Context, c *kubeapi.Client, m string, set func(*api.NixosConfigurationSpec)) time.Duration {
	tb.Helper()
	t0 := time.Now()
	if err := c.Cordon(ctx, m, true); err != nil {
		tb.Fatal(err)
	}
	testwait.For(tb, 2*time.Minute, m+" drained", func() (bool, string) {
		pods, err := c.DrainPods(ctx, m)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.Terminating {
				continue
			}
			if err := c.Evict(ctx, p); err != nil && !errors.Is(err, kubeapi.ErrTooManyRequests) {
				return false, err.Error()
			}
		}
		return len(pods) == 0, fmt.Sprintf("pods left: %v", pods)
	})
	var gen int64
	switched := time.Now()
	testwait.For(tb, 10*time.Second, m+" switched", func() (bool, string) {
		cfg := &api.NixosConfiguration{}
		if err := f.st.Get(ctx, store.NixosConfigKey(m), cfg); err != nil {
			return false, err.Error()
		}
		set(&cfg.Spec)
		cfg.Spec.Generation++
		gen = cfg.Spec.Generation
		err := f.st.UpdateObject(ctx, cfg)
		return err == nil, fmt.Sprint(err)
	})
	// The rollout's gate: the Node Ready and its kubelet heard from
	// since the switch (its Lease renewed, or a status posted).
	testwait.For(tb, 2*time.Minute, m+" applied and Ready", func() (bool, string) {
		cfg := &api.NixosConfiguration{}
		if err := f.st.Get(ctx, store.NixosConfigKey(m), cfg); err != nil {
			return false, err.Error()
		}
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		leases, err := c.NodeLeases(ctx)
		if err != nil {
			return false, err.Error()
		}
		heard := !nodes[m].Heartbeat.Before(switched) || !leases[m].Before(switched)
		return cfg.Status.AppliedGeneration >= gen && nodes[m].Ready && heard,
			fmt.Sprintf("applied %d of %d, Node %+v, lease %s", cfg.Status.AppliedGeneration, gen, nodes[m], leases[m])
	})
	if err := c.Cordon(ctx, m, false); err != nil {
		tb.Fatal(err)
	}
	return time.Since(t0).Round(time.Millisecond)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

package kube

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/tests/kubetest"
)

// BenchmarkClusterReady measures, three times each and interleaved, on the
// sandbox's five machines (three control-plane, two data-plane):
//
//   - apply-to-ready: from nicoctl apply of a KubernetesCluster (etcd
//     provider nico) to its phase Ready, as the store's watch shows it:
//     machine selection and claims, the PKI, the etcd identity, the
//     cluster's Rollout (control plane first), each control-plane machine
//     starting a real kube-apiserver, controller-manager and scheduler
//     with the delivered files, the component probes, the kubeconfig;
//   - baseline: the same machines running the same generation with no
//     cluster: a Rollout (control plane first) of cluster.nix and the
//     files delivered inline (kubetest.StandaloneSpec), from its write to
//     its success.
//
// It reports both medians and their difference. Each cluster is deleted (nicoctl delete cluster --wait)
// and each baseline released before the next run; neither is timed.
func BenchmarkClusterReady(b *testing.B) {
	kubetest.FindBinaries(b) // skips (or fails) before the nicoctl build
	nicoctl := nicoctlBin(b)
	f := newFleet(b, fleetOptions{cps: 3, dps: 2, clusters: true})
	ctl := f.nicoctl(nicoctl)
	ctx, cancel := context.WithTimeout(b.Context(), 25*time.Minute)
	defer cancel()
	const runs = 3
	var base, ready []time.Duration
	for i := range runs {
		name := fmt.Sprintf("base-%d", i)
		spec, err := f.standaloneSpec(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		took, err := f.rollAndWait(ctx, name, spec, 5*time.Minute)
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
		b.Logf("run %d: baseline %s, apply to Ready %s", i, took.Round(time.Millisecond), ready[i].Round(time.Millisecond))
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

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

package kube

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkClusterReady measures, three times each and interleaved, the
// time the fleet's five machines (three control-plane, two data-plane)
// take to run a Kubernetes cluster's generation with no cluster
// controller: a Rollout of the same generation (cluster.nix, certificates
// and keys delivered inline; each control-plane machine starts a real
// kube-apiserver, controller-manager and scheduler and waits for them),
// from its write to its success. It reports the median.
func BenchmarkClusterReady(b *testing.B) {
	f := newFleet(b, fleetOptions{cps: 3, dps: 2})
	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Minute)
	defer cancel()
	const runs = 3
	var base []time.Duration
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
		b.Logf("baseline %s: generation rolled in %s", name, took.Round(time.Millisecond))
		if err := f.release(ctx, name+"-release"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(median(base).Seconds(), "baseline-s")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

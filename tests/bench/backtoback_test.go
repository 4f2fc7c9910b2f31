package bench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdadmin"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var flagPairs = flag.Int("nico.pairs", 3, "measured pairs of back-to-back joins per arm")

// BenchmarkBackToBackJoins shows what etcd's rule "the leader must have
// been connected to a quorum of voters for 5 s (HealthInterval) before a
// member is added" costs two control-plane hosts that join one after the
// other: the second join starts the moment the first member is a voter,
// and its MemberAddAsLearner is refused ("unhealthy cluster") until the
// first has been connected 5 s. nico and the tight loop, each on its own
// one-voter cluster; both members are removed again after each pair,
// untimed. Reported: the second join's time to voter beside the first's,
// and the difference, the cost of the rule per join.
func BenchmarkBackToBackJoins(b *testing.B) {
	f := newFleet(b, "cp-0")
	tight := newKubeadm(b, tightRetry)
	type pair struct{ first, second []time.Duration }
	var nico, base pair
	for i := -1; i < *flagPairs; i++ {
		ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
		a, na, err := f.add(ctx, fmt.Sprintf("cp-a%d", i+1))
		if err != nil {
			b.Fatalf("nico first join %d: %v", i, err)
		}
		c, nc, err := f.add(ctx, fmt.Sprintf("cp-b%d", i+1))
		if err != nil {
			b.Fatalf("nico second join %d: %v", i, err)
		}
		for _, n := range []*node{nc, na} {
			if err := f.remove(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
		ka, removeA, err := tight.add(ctx, fmt.Sprintf("t-a%d", i+1))
		if err != nil {
			b.Fatalf("tight first join %d: %v", i, err)
		}
		kc, removeC, err := tight.add(ctx, fmt.Sprintf("t-b%d", i+1))
		removeC()
		removeA()
		if err != nil {
			b.Fatalf("tight second join %d: %v", i, err)
		}
		cancel()
		for _, cli := range []*clientv3.Client{f.cli, tight.cli} {
			waitOneVoter(b, cli)
		}
		if i >= 0 {
			nico.first, nico.second = append(nico.first, a.voter), append(nico.second, c.voter)
			base.first, base.second = append(base.first, ka.voter), append(base.second, kc.voter)
		}
	}
	var t table
	t.add("arm", "n", "first p50", "second p50", "second p95", "cost p50")
	nf, ns := summarize(nico.first), summarize(nico.second)
	tf, ts := summarize(base.first), summarize(base.second)
	t.add("nico", nf.n, nf.p50, ns.p50, ns.p95, ns.p50-nf.p50)
	t.add("tight", tf.n, tf.p50, ts.p50, ts.p95, ts.p50-tf.p50)
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: two joins in a row on an empty store, times in ms from the start of each join\n", b.Name())
	out.WriteString(t.String())
	fmt.Fprintf(&out, "cost = second p50 - first p50: etcd refuses the second MemberAddAsLearner until its leader has been\n"+
		"  connected to the first new voter for 5 s; nico asks again every %s, the tight loop every %s.\n", etcdadmin.AddEvery, tightRetry)
	fmt.Print(out.String())
	b.ReportMetric(ms(nf.p50), "nico-first-p50-ms")
	b.ReportMetric(ms(ns.p50), "nico-second-p50-ms")
	b.ReportMetric(ms(ns.p50-nf.p50), "nico-cost-ms")
	b.ReportMetric(ms(tf.p50), "tight-first-p50-ms")
	b.ReportMetric(ms(ts.p50), "tight-second-p50-ms")
	b.ReportMetric(ms(ts.p50-tf.p50), "tight-cost-ms")
}

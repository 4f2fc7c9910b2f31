package bench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// valueSize is the size of each value written to fill a store.
const valueSize = 64 << 10

// flagPad adds small writes after the fill. Past etcd's default snapshot
// count (10000) a new learner is sent a snapshot of the whole database
// instead of the raft log; with etcd v3.7.3 embedded, such learners did not
// become ready within 3 minutes (publish failed with "too many requests"),
// in both arms, so the default leaves it out.
var flagPad = flag.Int("nico.pad", 0, "small writes after the 64MiB fill (10500 forces the snapshot path)")

// BenchmarkJoinToVoter times joins from their start until the member list
// shows the new member as a voter: nico's (agent.Run with the coordinator
// leading) beside the kubeadm way (MemberAddAsLearner, start the member,
// MemberPromote every 500ms), alternating, on two one-voter clusters that
// run side by side in this process. After each join the node is removed
// again, untimed, so every join of both arms meets the same cluster: one
// voter and no learner.
func BenchmarkJoinToVoter(b *testing.B) {
	b.Run("empty", func(b *testing.B) { benchJoin(b, 0) })
	b.Run("64MiB", func(b *testing.B) { benchJoin(b, 64<<20) })
}

func benchJoin(b *testing.B, size int) {
	f := newFleet(b, "cp-0")
	k := newKubeadm(b)
	var fillNote string
	if size > 0 {
		for _, cli := range []*clientv3.Client{f.cli, k.cli} {
			db, err := fill(b.Context(), cli, size)
			if err != nil {
				b.Fatal(err)
			}
			fillNote = fmt.Sprintf("%d keys x %d KiB, then %d small writes; db %d MiB", size/valueSize, valueSize>>10, *flagPad, db>>20)
		}
	}
	var nico, base []joinTimes
	var addRetries, promoteTries int
	// Join -1 is a warm-up of each arm and is not counted; the arm that
	// goes first alternates.
	for i := -1; i < *flagJoins; i++ {
		arms := []func() error{
			func() error {
				ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
				defer cancel()
				jt, err := f.join(ctx, fmt.Sprintf("cp-%d", i+2))
				if err == nil && i >= 0 {
					nico = append(nico, jt)
				}
				return err
			},
			func() error {
				ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
				defer cancel()
				j, err := k.join(ctx, fmt.Sprintf("k-%d", i+2))
				if err == nil && i >= 0 {
					base = append(base, j.joinTimes)
					addRetries += j.addRetries
					promoteTries += j.promoteTries
				}
				return err
			},
		}
		if i%2 != 0 {
			arms[0], arms[1] = arms[1], arms[0]
		}
		for _, arm := range arms {
			if err := arm(); err != nil {
				b.Fatalf("join %d: %v", i, err)
			}
			// The next join meets the same cluster: one voter, no learner.
			for _, cli := range []*clientv3.Client{f.cli, k.cli} {
				testwait.For(b, 30*time.Second, "the removal settled", func() (bool, string) {
					ms, err := cli.MemberList(b.Context())
					if err != nil {
						return false, err.Error()
					}
					return len(ms.Members) == 1 && !ms.Members[0].IsLearner, fmt.Sprintf("members %v", ms.Members)
				})
			}
		}
	}

	ns, ks := summarize(voterTimes(nico)), summarize(voterTimes(base))
	var t table
	t.add("arm", "n", "p50", "p95", "min", "max", "added p50", "named p50", "voter p50", "removal p50")
	for _, a := range []struct {
		name string
		s    summary
		jt   []joinTimes
	}{{"nico", ns, nico}, {"kubeadm", ks, base}} {
		ad, st, vo, rm := stages(a.jt)
		t.add(a.name, a.s.n, a.s.p50, a.s.p95, a.s.min, a.s.max, ad.p50, st.p50, vo.p50, rm.p50)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: join to voter, store %s, times in ms from the start of the join\n", b.Name(), map[bool]string{true: "empty", false: fillNote}[size == 0])
	out.WriteString(t.String())
	fmt.Fprintf(&out, "ratio nico/kubeadm: p50 %.2f, p95 %.2f\n", ratio(ns.p50, ks.p50), ratio(ns.p95, ks.p95))
	fmt.Fprintf(&out, "stages (each measured from the previous one): added = until the member list holds the learner\n"+
		"  (nico: agent start, register, join request, coordinator AddLearner; kubeadm: MemberAddAsLearner, retried %d times in all);\n"+
		"  named = until the leader applied the learner's name (etcd's publish); voter = until promoted (kubeadm: %.1f\n"+
		"  MemberPromote calls per join, every %s; nico tries at once, then on 50 ms..1 s jittered backoff while watching the learner catch up);\n"+
		"  removal = the untimed removal after the join (etcd refuses it until the new voter has been connected 5s).\n",
		addRetries, float64(promoteTries)/float64(max(1, len(base))), kubeadmRetry)
	fmt.Fprintf(&out, "shape: one voter; each join removed again, untimed; embedded members, tick %s, election %s;\n"+
		"  nico agent retry %s, coordinator resync %s; member list polled every %s.\n", tickInterval, electionTimeout, agentRetry, coordResync, pollEvery)
	// Printed, not logged: go test keeps only 10 lines of a benchmark's log.
	fmt.Print(out.String())

	b.ReportMetric(ms(ns.p50), "nico-p50-ms")
	b.ReportMetric(ms(ns.p95), "nico-p95-ms")
	b.ReportMetric(ms(ks.p50), "kubeadm-p50-ms")
	b.ReportMetric(ms(ks.p95), "kubeadm-p95-ms")
	b.ReportMetric(ratio(ns.p50, ks.p50), "ratio-p50")
	b.ReportMetric(ratio(ns.p95, ks.p95), "ratio-p95")
}

// join starts an agent named name and times it until its member is a
// voter; then, untimed, it removes the node again.
func (f *fleet) join(ctx context.Context, name string) (joinTimes, error) {
	cfg := f.agentConfig(name, false)
	t0 := time.Now()
	wait := watchJoin(ctx, f.cli, cfg.PeerURL, t0)
	n := f.start(cfg)
	jt, err := wait()
	if err != nil {
		return jt, err
	}
	t1 := time.Now()
	err = f.remove(ctx, n)
	jt.removal = time.Since(t1)
	return jt, err
}

func voterTimes(jts []joinTimes) []time.Duration {
	var ds []time.Duration
	for _, jt := range jts {
		ds = append(ds, jt.voter)
	}
	return ds
}

// stages summarizes the stages of joins: until added, added until named,
// named until voter, and the removal after.
func stages(jts []joinTimes) (added, named, voter, removal summary) {
	var a, s, v, r []time.Duration
	for _, jt := range jts {
		st := max(jt.named, jt.added)
		a, s, v, r = append(a, jt.added), append(s, st-jt.added), append(v, jt.voter-st), append(r, jt.removal)
	}
	return summarize(a), summarize(s), summarize(v), summarize(r)
}

// fill writes size bytes in valueSize values, then -nico.pad small writes,
// and returns the database size.
func fill(ctx context.Context, cli *clientv3.Client, size int) (int64, error) {
	val := strings.Repeat("x", valueSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				var err error
				switch {
				case i < size/valueSize:
					_, err = cli.Put(ctx, fmt.Sprintf("/bench/fill/%05d", i), val)
				case i < size/valueSize+*flagPad:
					_, err = cli.Put(ctx, "/bench/pad", fmt.Sprint(i))
				default:
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("fill: %w", err)
	}
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		return 0, err
	}
	return st.DbSize, nil
}

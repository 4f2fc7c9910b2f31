package bench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
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

// flagVoters is the number of voters of every arm's cluster before each
// join. With more than one, the leader replicates to the other voters
// while the learner catches up, and quorum counts them, as in a fleet
// that grows past its first members.
var flagVoters = flag.Int("nico.voters", 1, "voters of each arm's cluster before each join (1 or 3)")

// BenchmarkJoinToVoter times joins from their start until the member list
// shows the new member as a voter: nico's (agent.Run with the coordinator
// leading) beside two baselines, the kubeadm way (MemberAddAsLearner, then
// MemberPromote every 500ms while the member starts) and a tight loop (the
// same, every 10ms), in turn, on three one-voter clusters that run side by
// side in this process. After each join the node is removed again, untimed,
// so every join of every arm meets the same cluster: one voter and no
// learner. Stores: empty; 64 MiB in 64 KiB values; 100 000 small keys (more
// than etcd's 5 000-entry gap, so each learner gets its log as a snapshot:
// docs/etcd-snapshot-join.md).
func BenchmarkJoinToVoter(b *testing.B) {
	b.Run("empty", func(b *testing.B) { benchJoin(b, storeFill{pad: *flagHistory, clear: true}) })
	b.Run("64MiB", func(b *testing.B) {
		benchJoin(b, storeFill{keys: (64 << 20) / valueSize, size: valueSize, pad: *flagPad})
	})
	b.Run("100k-keys", func(b *testing.B) { benchJoin(b, storeFill{keys: 100_000, size: smallValueSize}) })
}

// flagHistory gives the empty store a history: that many writes to one
// key, then its delete, before the joins. Past etcd's first in-memory
// snapshot at 100 raft entries (docs/etcd-snapshot-join.md) every new
// member is sent a snapshot instead of the log. nico's own objects put its
// cluster past that from the start, so on a store never written to only
// the baselines' learners replay a short log; with -nico.history 200 every
// arm's learner gets a snapshot, as on any cluster that has served writes.
var flagHistory = flag.Int("nico.history", 0, "writes (then a delete) to the empty store before its joins; 200 makes every learner get a snapshot")

// smallValueSize is the value size of the 100 000-key store.
const smallValueSize = 128

// storeFill is what a benchmark writes before its joins: keys values of
// size bytes, then pad small writes to one key, which clear deletes again.
type storeFill struct {
	keys, size, pad int
	clear           bool
}

// arm is one way of joining, timed by benchJoin.
type arm struct {
	name string
	join func(ctx context.Context, name string) (joinTimes, error)
	jts  []joinTimes
}

func benchJoin(b *testing.B, fillWith storeFill) {
	voters := *flagVoters
	f := newFleet(b, "cp-0")
	f.grow(b, voters)
	k := newKubeadmVoters(b, kubeadmRetry, voters)
	tight := newKubeadmVoters(b, tightRetry, voters)
	tight.serving = true // nico's rule: promoted only once its member serves
	fillNote := "empty"
	if fillWith.keys > 0 || fillWith.pad > 0 {
		for _, cli := range []*clientv3.Client{f.cli, k.cli, tight.cli} {
			db, err := fill(b.Context(), cli, fillWith)
			if err != nil {
				b.Fatal(err)
			}
			fillNote = fmt.Sprintf("%d keys x %d B, then %d small writes; db %d MiB", fillWith.keys, fillWith.size, fillWith.pad, db>>20)
			if fillWith.clear {
				fillNote = fmt.Sprintf("empty after %d writes and a delete", fillWith.pad)
			}
		}
	}
	var addRetries, promoteTries, tightTries int
	baseline := func(k *kubeadm, prefix string, tries *int) func(ctx context.Context, name string) (joinTimes, error) {
		return func(ctx context.Context, name string) (joinTimes, error) {
			j, err := k.join(ctx, prefix+name)
			addRetries += j.addRetries
			*tries += j.promoteTries
			return j.joinTimes, err
		}
	}
	arms := []*arm{
		{name: "nico", join: f.join},
		{name: "kubeadm", join: baseline(k, "k-", &promoteTries)},
		{name: "tight", join: baseline(tight, "t-", &tightTries)},
	}
	clients := []*clientv3.Client{f.cli, k.cli, tight.cli}
	// Join -1 is a warm-up of each arm and is not counted; the arm that
	// goes first rotates.
	for i := -1; i < *flagJoins; i++ {
		for j := range arms {
			a := arms[(j+i+1)%len(arms)]
			ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
			jt, err := a.join(ctx, fmt.Sprintf("cp-%d", i+2))
			cancel()
			if err != nil {
				b.Fatalf("%s join %d: %v", a.name, i, err)
			}
			if i >= 0 {
				a.jts = append(a.jts, jt)
			}
			// The next join meets the same cluster: its voters, no learner.
			for _, cli := range clients {
				waitVoters(b, cli, voters)
			}
		}
	}

	sums := map[string]summary{}
	var t table
	t.add("arm", "n", "p50", "p95", "min", "max", "added p50", "named p50", "voter p50", "removal p50")
	for _, a := range arms {
		s := summarize(voterTimes(a.jts))
		sums[a.name] = s
		ad, st, vo, rm := stages(a.jts)
		t.add(a.name, s.n, s.p50, s.p95, s.min, s.max, ad.p50, st.p50, vo.p50, rm.p50)
	}
	ns, ks, ts := sums["nico"], sums["kubeadm"], sums["tight"]
	best := ks
	if ts.p50 < ks.p50 {
		best = ts
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: join to voter, store %s, times in ms from the start of the join\n", b.Name(), fillNote)
	out.WriteString(t.String())
	fmt.Fprintf(&out, "ratio p50: nico/tight %.2f, nico/kubeadm %.2f, nico/best baseline %.2f; p95: nico/tight %.2f, nico/kubeadm %.2f\n",
		ratio(ns.p50, ts.p50), ratio(ns.p50, ks.p50), ratio(ns.p50, best.p50), ratio(ns.p95, ts.p95), ratio(ns.p95, ks.p95))
	n := float64(max(1, len(arms[1].jts)))
	fmt.Fprintf(&out, "stages (each measured from the previous one): added = until the member list holds the learner\n"+
		"  (nico: agent start, register, join request, coordinator AddLearner; baselines: MemberAddAsLearner, retried %d times in all);\n"+
		"  named = until the leader applied the learner's name (etcd's publish); voter = until promoted (MemberPromote calls\n"+
		"  per join: kubeadm %.1f every %s, tight %.1f every %s (each once its learner's own status answers, as nico's);\n"+
		"  nico tries at once once its learner serves, then %s after each refusal\n"+
		"  for %s, every %s after, and whenever the learner's agent reports its member serving);\n"+
		"  removal = the untimed removal after the join (etcd refuses it until the new voter has been connected 5s).\n",
		addRetries, float64(promoteTries)/n, kubeadmRetry, float64(tightTries)/n, tightRetry, etcdadmin.PromoteSoon, etcdadmin.PromoteSoonFor, etcdadmin.PromoteEvery)
	fmt.Fprintf(&out, "shape: %d voter(s); each join removed again, untimed; embedded members, tick %s, election %s;\n"+
		"  nico agent retry %s, coordinator resync %s; member list polled every %s.\n", voters, tickInterval, electionTimeout, agentRetry, coordResync, pollEvery)
	if f.trace != nil {
		fmt.Fprintf(&out, "trace milestones:\n%s", traceTable([]string{"nico", "kubeadm", "tight"}, []*tracer{f.trace, k.trace, tight.trace}))
	}
	// Printed, not logged: go test keeps only 10 lines of a benchmark's log.
	fmt.Print(out.String())

	b.ReportMetric(ms(ns.p50), "nico-p50-ms")
	b.ReportMetric(ms(ns.p95), "nico-p95-ms")
	b.ReportMetric(ms(ks.p50), "kubeadm-p50-ms")
	b.ReportMetric(ms(ks.p95), "kubeadm-p95-ms")
	b.ReportMetric(ms(ts.p50), "tight-p50-ms")
	b.ReportMetric(ms(ts.p95), "tight-p95-ms")
	b.ReportMetric(ratio(ns.p50, ks.p50), "ratio-p50")
	b.ReportMetric(ratio(ns.p95, ks.p95), "ratio-p95")
	b.ReportMetric(ratio(ns.p50, ts.p50), "nico/tight-p50")
	b.ReportMetric(ratio(ns.p50, best.p50), "nico/best-p50")
}

// waitOneVoter waits until cli's cluster is one voter and nothing else.
func waitOneVoter(b *testing.B, cli *clientv3.Client) { waitVoters(b, cli, 1) }

// waitVoters waits until cli's cluster is n voters and nothing else.
func waitVoters(b *testing.B, cli *clientv3.Client, n int) {
	testwait.For(b, 30*time.Second, "the removal settled", func() (bool, string) {
		ms, err := cli.MemberList(b.Context())
		if err != nil {
			return false, err.Error()
		}
		learners := 0
		for _, m := range ms.Members {
			if m.IsLearner {
				learners++
			}
		}
		return len(ms.Members) == n && learners == 0, fmt.Sprintf("members %v", ms.Members)
	})
}

// join starts an agent named name and times it until its member is a
// voter; then, untimed, it removes the node again.
func (f *fleet) join(ctx context.Context, name string) (joinTimes, error) {
	jt, n, err := f.add(ctx, name)
	if err != nil {
		return jt, err
	}
	t1 := time.Now()
	err = f.remove(ctx, n)
	jt.removal = time.Since(t1)
	return jt, err
}

// add is join without the removal.
func (f *fleet) add(ctx context.Context, name string) (joinTimes, *node, error) {
	cfg := f.AgentConfig(name, false)
	fleetkit.Provision(f.TB, cfg, f.Endpoints()) // untimed, as the baselines' certificates
	t0 := time.Now()
	if f.trace != nil {
		f.trace.reset(t0)
	}
	wait := watchJoin(ctx, f.cli, cfg.PeerURL, t0)
	n := f.Run(cfg, f.NewRuntime())
	jt, err := wait()
	if f.trace != nil {
		f.trace.add(t0.Add(jt.voter), fmt.Sprintf("bench: voter seen (added %v, named %v, voter %v)", jt.added, jt.named, jt.voter))
		fmt.Printf("\ntrace of nico join %s:\n%s", name, f.trace.String())
		f.trace.finish()
		f.trace.reset(time.Time{})
	}
	return jt, n, err
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

// fill writes what fillWith says and returns the database size.
func fill(ctx context.Context, cli *clientv3.Client, fillWith storeFill) (int64, error) {
	val := strings.Repeat("x", fillWith.size)
	err := fleetkit.Fill(ctx, cli, 16, fillWith.keys+fillWith.pad, func(i int) (string, string) {
		if i < fillWith.keys {
			return fmt.Sprintf("/bench/fill/%06d", i), val
		}
		return "/bench/pad", fmt.Sprint(i)
	})
	if err != nil {
		return 0, err
	}
	if fillWith.clear {
		if _, err := cli.Delete(ctx, "/bench/pad"); err != nil {
			return 0, err
		}
	}
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		return 0, err
	}
	return st.DbSize, nil
}

package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Writer settings: a small key every writeEvery, each Put bounded by
// writeTimeout.
const (
	writeEvery   = 10 * time.Millisecond
	writeTimeout = time.Second
	writePrefix  = "/bench/avail/"
)

// write is one Put of the writer: key writePrefix+index, value index.
type write struct {
	start time.Time
	took  time.Duration
	ok    bool
}

// phase is a stretch of the sequence, from its mark to the next.
type phase struct {
	name string
	at   time.Time
}

// BenchmarkAvailability runs a client that writes a small key every 10ms
// (1s timeout per Put, endpoints kept in sync with the member list) through
// the demo sequence: a quiet stretch on one voter (the baseline), growing
// 1 -> 5 voters through four agents started at once, a quiet stretch, then
// removing the etcd leader's node and one more, and a last quiet stretch.
// At the end every acknowledged write must be readable.
func BenchmarkAvailability(b *testing.B) {
	f := newFleet(b, "cp-1")
	cli := etcdtest.Dial(b, pki.RootIdentity, time.Second, f.Endpoints()...)
	defer cli.Close()
	wctx, stopWriter := context.WithCancel(b.Context())
	writes := make(chan []write, 1)
	go func() { writes <- writeLoop(wctx, cli) }()

	var phases []phase
	mark := func(name string) { phases = append(phases, phase{name, time.Now()}) }
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	mark("quiet, 1 voter")
	// The quiet stretches are measurement windows of a fixed length (the
	// writer runs through them), not waits for a condition.
	time.Sleep(10 * time.Second)
	mark("grow 1->5")
	for i := 2; i <= 5; i++ {
		f.Start(f.AgentConfig(fmt.Sprintf("cp-%d", i), false))
	}
	f.WaitVoterCount(5*time.Minute, 5)
	mark("quiet, 5 voters")
	time.Sleep(5 * time.Second)
	leader := f.etcdLeader()
	mark("remove leader " + leader.Cfg.Name)
	if err := f.remove(ctx, leader); err != nil {
		b.Fatal(err)
	}
	// Then a follower of the new leader: the first by name.
	newLeader := f.etcdLeader()
	var other *node
	for _, n := range f.Nodes() {
		if n != newLeader {
			other = n
			break
		}
	}
	mark("remove follower " + other.Cfg.Name)
	if err := f.remove(ctx, other); err != nil {
		b.Fatal(err)
	}
	mark("quiet, 3 voters")
	time.Sleep(5 * time.Second)
	mark("end")
	stopWriter()
	ws := <-writes

	acked, lost, extra, err := verify(ctx, etcdtest.Dial(b, pki.RootIdentity, 0, f.Endpoints()...), ws)
	if err != nil {
		b.Fatal(err)
	}
	var t table
	t.add("phase", "secs", "writes", "failed", "max stall", "p50", "p99", "max")
	var all phaseStats
	var quiet phaseStats
	for i := range len(phases) - 1 {
		p := stats(ws, phases[i].at, phases[i+1].at)
		if i == 0 {
			quiet = p
		}
		t.add(phases[i].name, fmt.Sprintf("%.1f", phases[i+1].at.Sub(phases[i].at).Seconds()), p.attempts, p.failed, p.maxStall, p.lat.p50, p.lat.p99, p.lat.max)
	}
	all = stats(ws, phases[0].at, phases[len(phases)-1].at)
	t.add("all", fmt.Sprintf("%.1f", phases[len(phases)-1].at.Sub(phases[0].at).Seconds()), all.attempts, all.failed, all.maxStall, all.lat.p50, all.lat.p99, all.lat.max)
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: a Put every %s (timeout %s), times in ms; latency counts failed Puts too\n", b.Name(), writeEvery, writeTimeout)
	out.WriteString(t.String())
	fmt.Fprintf(&out, "max stall = longest gap between consecutive successful writes, counted in the phase where it ended.\n")
	fmt.Fprintf(&out, "vs quiet 1-voter baseline: max stall x%.1f, p99 x%.1f\n", ratio(all.maxStall, quiet.maxStall), ratio(all.lat.p99, quiet.lat.p99))
	fmt.Fprintf(&out, "acknowledged writes: %d, all read back: %v (lost %d); failed writes found stored anyway: %d\n", acked, lost == 0, lost, extra)
	fmt.Print(out.String())

	b.ReportMetric(float64(all.attempts), "writes")
	b.ReportMetric(float64(all.failed), "failed-writes")
	b.ReportMetric(float64(lost), "lost-writes")
	b.ReportMetric(ms(all.maxStall), "max-stall-ms")
	b.ReportMetric(ms(all.lat.p99), "p99-ms")
	b.ReportMetric(ms(quiet.maxStall), "quiet-max-stall-ms")
	b.ReportMetric(ms(quiet.lat.p99), "quiet-p99-ms")
	if lost > 0 {
		b.Errorf("%d acknowledged writes were lost", lost)
	}
}

// writeLoop puts writePrefix+i every writeEvery, one at a time, until ctx
// ends, and returns every attempt.
func writeLoop(ctx context.Context, cli *clientv3.Client) []write {
	var ws []write
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ws
		case <-tick.C:
		}
		i := len(ws)
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, writeTimeout)
		_, err := cli.Put(pctx, writePrefix+fmt.Sprintf("%07d", i), strconv.Itoa(i))
		cancel()
		if ctx.Err() != nil {
			return ws // cut short by the end, not by the cluster
		}
		ws = append(ws, write{start: start, took: time.Since(start), ok: err == nil})
	}
}

// phaseStats are the writes that started in one phase.
type phaseStats struct {
	attempts, failed int
	maxStall         time.Duration
	lat              summary
}

func stats(ws []write, from, to time.Time) phaseStats {
	var p phaseStats
	var lat []time.Duration
	var lastOK time.Time
	for _, w := range ws {
		in := !w.start.Before(from) && w.start.Before(to)
		if in {
			p.attempts++
			lat = append(lat, w.took)
			if !w.ok {
				p.failed++
			}
		}
		if !w.ok {
			continue
		}
		end := w.start.Add(w.took)
		if in && !lastOK.IsZero() {
			p.maxStall = max(p.maxStall, end.Sub(lastOK))
		}
		lastOK = end
	}
	p.lat = summarize(lat)
	return p
}

// verify reads the writer's keys back through cli (a client of the
// surviving members, closed here): lost
// counts acknowledged writes missing or wrong, extra failed writes that
// were applied all the same (allowed: a timeout does not say it failed).
func verify(ctx context.Context, cli *clientv3.Client, ws []write) (acked, lost, extra int, err error) {
	defer cli.Close()
	resp, err := cli.Get(ctx, writePrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read back: %w", err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	for i, w := range ws {
		v, ok := got[writePrefix+fmt.Sprintf("%07d", i)]
		switch {
		case w.ok:
			acked++
			if !ok || v != strconv.Itoa(i) {
				lost++
			}
		case ok:
			extra++
		}
	}
	return acked, lost, extra, nil
}

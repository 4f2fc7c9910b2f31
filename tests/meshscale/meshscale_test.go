package meshscale

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	flagSizes        = flag.String("nico.meshscale.sizes", "300", "mesh sizes, comma-separated (1 000 members do not converge on a 2-core machine: docs/performance.md)")
	flagProcs        = flag.Int("nico.meshscale.procs", 4, "child processes the members are split over")
	flagKills        = flag.Int("nico.meshscale.kills", 3, "members crashed one after another once the mesh has converged")
	flagTune         = flag.String("nico.meshscale.tune", "large", "memberlist timings: large (the lan profile with tuneLarge), lan or wan (the product's profiles)")
	flagConvergeWait = flag.Duration("nico.meshscale.convergeWait", 10*time.Minute, "how long a mesh may take to converge")
	flagTrace        = flag.Duration("nico.meshscale.trace", 30*time.Second, "how often progress is logged (under -test.v; otherwise kept for a failure's message)")
	flagDetectWait   = flag.Duration("nico.meshscale.detectWait", 10*time.Minute, "how long every member may take to see a crashed member dead")
)

// TestMain runs the binary as a child of BenchmarkMeshScale when envChild
// is set, and as the test binary otherwise.
func TestMain(m *testing.M) {
	if spec := os.Getenv(envChild); spec != "" {
		os.Exit(runChild(spec, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// BenchmarkMeshScale runs meshes of -nico.meshscale.sizes members split
// over -nico.meshscale.procs child processes on loopback (see the package
// doc) and measures the time from the first start until every member sees
// every member alive, the children's resident memory and CPU, and, for
// each of -nico.meshscale.kills members crashed one after another, the time
// until every other member sees it suspect (or dead) and dead.
func BenchmarkMeshScale(b *testing.B) {
	sizes, err := parseSizes(*flagSizes)
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := timings(*flagTune); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		for _, n := range sizes {
			r := runMesh(b, n)
			sfx := fmt.Sprintf("-n%d", n)
			b.ReportMetric(r.converged.Seconds(), "s/converge"+sfx)
			b.ReportMetric(median(r.suspect99).Seconds(), "s/suspect99-p50"+sfx)
			b.ReportMetric(median(r.suspect).Seconds(), "s/suspect-p50"+sfx)
			b.ReportMetric(median(r.dead).Seconds(), "s/detect-p50"+sfx)
			b.ReportMetric(slices.Max(r.dead).Seconds(), "s/detect-max"+sfx)
			b.ReportMetric(r.memberKiB()/1024*1000, "MiB-rss/1000"+sfx)
			b.Logf("%s", r)
		}
	}
}

// result is one mesh's figures.
type result struct {
	n, procs       int
	tune           string
	started        time.Duration   // until every member had started
	alive99        time.Duration   // until 99% of (member, peer) views were alive
	converged      time.Duration   // until every member saw every member alive
	suspect, dead  []time.Duration // per crash, until every other member saw it suspect (or dead), dead
	suspect99      []time.Duration // per crash, until 99% of the others saw it suspect (or dead)
	rssKiB         int64           // the children's resident memory once converged
	baseKiB        int64           // theirs before their first member started
	cpuConverge    float64         // the children's CPU seconds until converged
	cpuIdlePercent float64         // their CPU during the crashes, in % of one core
	udpErrors      int64           // UDP datagrams the host dropped on receive meanwhile
	load           string
}

func (r result) String() string {
	return fmt.Sprintf("meshscale: %d members in %d processes, tune %s: all started %.1fs, 99%% of views alive %.1fs, converged %.1fs; "+
		"crash to 99%% of the members seeing it suspect p50 %.1fs, all %.1fs, all seeing it dead p50 %.1fs max %.1fs (%d crashes); "+
		"RSS %.0f MiB (%.0f MiB before the members; %.0f KiB/member); children's CPU %.0fs to converge, %.0f%% of a core after; host UDP receive errors +%d; load %s",
		r.n, r.procs, r.tune, r.started.Seconds(), r.alive99.Seconds(), r.converged.Seconds(),
		median(r.suspect99).Seconds(), median(r.suspect).Seconds(), median(r.dead).Seconds(), slices.Max(r.dead).Seconds(), len(r.dead),
		float64(r.rssKiB)/1024, float64(r.baseKiB)/1024, r.memberKiB(), r.cpuConverge, r.cpuIdlePercent, r.udpErrors, r.load)
}

// memberKiB is the children's resident memory per member, less what
// they held before their first member started.
func (r result) memberKiB() float64 { return float64(r.rssKiB-r.baseKiB) / float64(r.n) }

// runMesh starts n members over the children, waits for convergence,
// crashes members one after another and returns the figures; any failure
// fails b. Every child is killed before it returns.
func runMesh(b *testing.B, n int) result {
	b.Helper()
	k := max(1, min(*flagProcs, n/seedMembers, 50))
	r := result{n: n, procs: k, tune: *flagTune}
	ctx, cancel := context.WithCancel(b.Context())
	reports := make(chan tagged, 64*k)
	var procs []*proc
	defer func() {
		cancel()
		for _, p := range procs {
			p.kill()
		}
	}()
	// progress is logged under -test.v and kept for a failure's message
	// otherwise (a benchmark's log is cut after a few lines).
	var trace []string
	progress := func(format string, a ...any) {
		b.Helper()
		if testing.Verbose() {
			b.Logf(format, a...)
		}
		trace = append(trace, fmt.Sprintf(format, a...))
	}
	fail := func(format string, a ...any) {
		b.Helper()
		tails := slices.Clone(trace[max(0, len(trace)-20):])
		for _, p := range procs {
			if t := strings.TrimSpace(p.stderrTail()); t != "" {
				tails = append(tails, fmt.Sprintf("child %d stderr: %s", p.spec.Index, t))
			}
		}
		b.Fatalf("%d members: %s\n%s", n, fmt.Sprintf(format, a...), strings.Join(tails, "\n"))
	}
	dir := b.TempDir()
	udp0 := udpErrors()
	specs := make([]childSpec, k)
	for i := range k {
		specs[i] = childSpec{Index: i, Total: n, Count: n / k, IP: fmt.Sprintf("127.0.0.%d", 200+i), Tune: *flagTune}
		if i < n%k {
			specs[i].Count++
		}
	}
	start := time.Now()
	launch := func(s childSpec) {
		p, err := spawn(ctx, dir, s, reports)
		if err != nil {
			fail("%v", err)
		}
		procs = append(procs, p)
	}
	launch(specs[0])

	// next waits for the next report, failing b on a child's error or exit
	// and at the deadline.
	next := func(deadline <-chan time.Time, waiting func() string) tagged {
		b.Helper()
		select {
		case t := <-reports:
			switch t.r.Type {
			case repError:
				fail("child %d: %s", t.child, t.r.Err)
			case repExit:
				fail("child %d exited: %s", t.child, t.r.Err)
			case repView:
				p := procs[t.child]
				p.last = t.r
				if t.r.SeenTimes != nil {
					p.seenTimes, p.seenOf = t.r.SeenTimes, t.r.Victim
				}
			}
			return t
		case <-deadline:
			fail("%s", waiting())
		}
		return tagged{}
	}

	// The others start once child 0's seed members are up.
	seedWait := time.After(time.Minute)
	for {
		t := next(seedWait, func() string { return "child 0 did not report its seeds within 1m" })
		if t.r.Type == repSeeds {
			for _, s := range specs[1:] {
				s.Seeds = t.r.Addrs
				launch(s)
			}
			break
		}
	}

	// Convergence: every child's latest view has all its members seeing
	// every member alive.
	convWait := time.After(*flagConvergeWait)
	load := &loadSampler{at: start, udp: udp0}
	every := time.NewTicker(*flagTrace)
	defer every.Stop()
	startedChildren := 0
	for r.converged == 0 {
		select {
		case <-every.C:
			progress("%d members, %.0fs: %s", n, time.Since(start).Seconds(), load.sample(procs, n))
			continue
		default:
		}
		t := next(convWait, func() string {
			return fmt.Sprintf("not converged within %s: %.2f%% of views alive, %s", *flagConvergeWait, 100*aliveShare(procs, n), views(procs))
		})
		switch t.r.Type {
		case repStarted:
			r.baseKiB += t.r.BaseKiB
			if startedChildren++; startedChildren == k {
				r.started = time.Since(start)
				progress("%d members, %.0fs: every member started", n, r.started.Seconds())
			}
		case repView:
			if r.alive99 == 0 && aliveShare(procs, n) >= 0.99 {
				r.alive99 = time.Since(start)
			}
			if at := convergedAt(procs, k); at != 0 {
				r.converged = time.Unix(0, at).Sub(start)
			}
		}
	}
	cpu0 := time.Now()
	var cpuAtConverge float64
	for _, p := range procs {
		r.rssKiB += rssKiB(p.cmd.Process.Pid)
		cpuAtConverge += cpuSeconds(p.cmd.Process.Pid)
	}
	r.cpuConverge = cpuAtConverge

	// Crashes, one after another: a member of child 1, 2, ... (the last of
	// its members that still runs: no member's seed), watched by all.
	crashedIn := make([]int, k)
	for c := range *flagKills {
		owner := procs[(1+c)%k]
		name := fmt.Sprintf("c%02d-m%04d", owner.spec.Index, owner.spec.Count-1-crashedIn[owner.spec.Index])
		crashedIn[owner.spec.Index]++
		for _, p := range procs {
			verb := cmdWatch
			if p == owner {
				verb = cmdCrash
			}
			if err := p.send(verb, name); err != nil {
				fail("telling child %d to %s %s: %v", p.spec.Index, verb, name, err)
			}
		}
		var crashedAt int64
		detectWait := time.After(*flagDetectWait)
		for {
			t := next(detectWait, func() string {
				return fmt.Sprintf("%s not seen dead by every member within %s: %s", name, *flagDetectWait, views(procs))
			})
			if t.r.Type == repCrashed && t.r.Victim == name {
				crashedAt = t.r.At
			}
			if crashedAt == 0 {
				continue
			}
			select {
			case <-every.C:
				progress("%s, %.0fs after its crash: %s", name, time.Since(time.Unix(0, crashedAt)).Seconds(), views(procs))
			default:
			}
			if seen, dead, ok := detected(procs, name); ok {
				r.suspect99 = append(r.suspect99, time.Duration(seenBy(procs, name, 0.99)-crashedAt))
				r.suspect = append(r.suspect, time.Duration(seen-crashedAt))
				r.dead = append(r.dead, time.Duration(dead-crashedAt))
				break
			}
		}
	}
	var cpuAfter float64
	for _, p := range procs {
		cpuAfter += cpuSeconds(p.cmd.Process.Pid)
	}
	r.cpuIdlePercent = 100 * (cpuAfter - cpuAtConverge) / time.Since(cpu0).Seconds()
	r.udpErrors = udpErrors() - udp0
	r.load = loadavg()
	if len(r.dead) == 0 {
		fail("no crash measured (-nico.meshscale.kills=%d)", *flagKills)
	}
	return r
}

// loadSampler describes the mesh and the host between two samples.
type loadSampler struct {
	at        time.Time
	cpu, wait float64
	udp       int64
}

// sample describes the children's latest views, their CPU since the last
// sample (200% is both cores of a 2-core host) and how long their threads
// waited for a CPU meanwhile (in the same unit: a starved mesh waits far
// longer than it runs), their RSS, the host's UDP receive errors since
// then and its load.
func (l *loadSampler) sample(procs []*proc, n int) string {
	var alive, suspect, known int
	var cpu, wait float64
	var rss int64
	for _, p := range procs {
		alive, suspect, known = alive+p.last.AliveViews, suspect+p.last.SuspectViews, known+p.last.KnownViews
		cpu += cpuSeconds(p.cmd.Process.Pid)
		wait += runQueueSeconds(p.cmd.Process.Pid)
		rss += rssKiB(p.cmd.Process.Pid)
	}
	now, udp := time.Now(), udpErrors()
	views := float64(n * n)
	dt := now.Sub(l.at).Seconds()
	out := fmt.Sprintf("views alive %.2f%%, suspect %.2f%%, known %.2f%%; children's CPU %.0f%%, waiting for a CPU %.0f%%, RSS %d MiB; host UDP receive errors +%d, load %s",
		100*float64(alive)/views, 100*float64(suspect)/views, 100*float64(known)/views,
		100*(cpu-l.cpu)/dt, 100*(wait-l.wait)/dt, rss/1024, udp-l.udp, loadavg())
	l.at, l.cpu, l.wait, l.udp = now, cpu, wait, udp
	return out
}

// aliveShare is the share of (member, peer) views alive in the children's
// latest views.
func aliveShare(procs []*proc, n int) float64 {
	alive := 0
	for _, p := range procs {
		alive += p.last.AliveViews
	}
	return float64(alive) / float64(n*n)
}

// convergedAt is when the last of k children had every member seeing every
// member alive, or 0 while some child's latest view does not.
func convergedAt(procs []*proc, k int) int64 {
	if len(procs) < k {
		return 0
	}
	var at int64
	for _, p := range procs {
		if p.last.FullSince == 0 {
			return 0
		}
		at = max(at, p.last.FullSince)
	}
	return at
}

// detected tells whether every running member sees name dead, and when the
// last of them first saw it suspect (or dead) and dead.
func detected(procs []*proc, name string) (seen, dead int64, ok bool) {
	for _, p := range procs {
		v := p.last
		if v.Victim != name || v.Dead < v.Members {
			return 0, 0, false
		}
		seen, dead = max(seen, v.LastSeen), max(dead, v.LastDead)
	}
	return seen, dead, true
}

// seenBy is when the given share of the running members had seen name
// suspect or dead, from their SeenTimes.
func seenBy(procs []*proc, name string, share float64) int64 {
	var all []int64
	for _, p := range procs {
		if p.seenOf == name {
			all = append(all, p.seenTimes...)
		}
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[max(0, int(math.Ceil(share*float64(len(all))))-1)]
}

// views describes the children's latest views.
func views(procs []*proc) string {
	var out []string
	for _, p := range procs {
		v := p.last
		out = append(out, fmt.Sprintf("child %d: %d of %d members see %d alive; victim %q seen by %d, dead to %d", p.spec.Index, v.Full, v.Members, v.Want, v.Victim, v.Seen, v.Dead))
		if v.Unseen != "" && v.Seen > 0 {
			out[len(out)-1] += fmt.Sprintf(" (not seen by %s)", v.Unseen)
		}
	}
	return strings.Join(out, "; ")
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("-nico.meshscale.sizes=%q: %q is not a mesh size (an integer of 2 or more)", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// median is the middle value (the lower of the two middle ones), 0 for none.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

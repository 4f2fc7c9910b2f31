package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"github.com/jonboulle/clockwork"
)

// BenchmarkGossipConvergence starts meshes of 100 and 500 members in one
// process (loopback; like an agent, each member joins through seeds: up to
// three earlier members, and the next starts once it has joined) and
// measures how long until every member sees every other alive, and the
// heap and goroutines each member costs.
//
// Why the plain lan profile does not converge at 500 in one process on 2
// cores: every member probes once a second with a 500 ms timeout, and
// while 500 members join (each join a TCP push-pull of the whole list, each
// alive message retransmitted 4*ceil(log10(n+1)) = 12 times to 3 nodes
// every 200 ms) the process saturates its cores; probes then miss their
// timeout, suspicions (and their refutations, and more alive messages)
// multiply, and the mesh feeds its own overload: thousands of suspicion
// timers queue on memberlist's node lock and the run never settles. Real
// fleets give each member its own machine; one process has to share 2
// cores among 500 members. -nico.meshTune=large (the default) therefore
// uses the timings memberlist's WAN config and its guidance for large
// clusters suggest (tuneLarge), for both sizes of one run; =lan keeps the
// plain profile.
//
// WAN probe timings alone do not suffice: 500 members stay at 50-70% of
// views alive for minutes. A CPU profile of such a run shows the garbage
// collector taking about 45% of the CPU, fed by memberlist's LZW
// compression (a 16 KiB table per packet) and NetTransport's fresh 64 KiB
// buffer per UDP packet, and memberlist's gossip rounds another quarter
// (picking broadcasts from queues made long by suspicions). tuneLarge
// therefore also turns compression off, gossips every 500 ms and
// retransmits half as often, and members start paced, each once the one
// before has joined, as a fleet comes up. A transport reading into one
// buffer per member and GC at 400% add nothing on top of these, and the
// GC setting inflates the heap figure by half, so neither is used.
// The measured figures (time to converge, heap and goroutines per member)
// are in docs/performance.md.
func BenchmarkGossipConvergence(b *testing.B) {
	for range b.N {
		tab := &table{}
		tab.add("members", "tuning", "start all ms", "99% alive ms", "converged ms", "alive % at end", "heap KiB/member", "goroutines/member")
		for _, n := range flagMeshSizes() {
			r := converge(b, n)
			conv := "no"
			if r.converged > 0 {
				conv = fmt.Sprintf("%.0f", ms(r.converged))
			}
			tab.add(n, *flagMeshTune, r.joined, r.t99, conv, fmt.Sprintf("%.2f", 100*r.final), fmt.Sprintf("%.0f", r.heapPerMember/1024), fmt.Sprintf("%.1f", r.goroutinesPerMember))
			b.ReportMetric(ms(r.t99), fmt.Sprintf("alive99-%d-ms", n))
			b.ReportMetric(ms(r.converged), fmt.Sprintf("converge-%d-ms", n))
			b.ReportMetric(r.heapPerMember/1024, fmt.Sprintf("heap-%d-KiB/member", n))
		}
		b.Logf("mesh convergence, lan profile tuned %q, one process on loopback (from the first start; converged: every member sees every other alive)\n%s", *flagMeshTune, tab)
	}
}

var (
	flagConvergeMin  = flag.Duration("nico.convergeWait", 90*time.Second, "how long a mesh may take to converge")
	flagMeshSizesStr = flag.String("nico.meshSizes", "100,500", "mesh sizes to converge")
	flagMeshTune     = flag.String("nico.meshTune", "large", "memberlist timings of the convergence benchmark: large (tuneLarge) or lan (the plain profile)")
)

func meshTune(b *testing.B) func(*memberlist.Config) {
	switch *flagMeshTune {
	case "large":
		return fleetkit.TuneLargeMesh
	case "lan":
		return nil
	}
	b.Fatalf("-nico.meshTune=%q: use large or lan", *flagMeshTune)
	return nil
}

func flagMeshSizes() []int {
	var out []int
	for _, f := range strings.Split(*flagMeshSizesStr, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil && n > 1 {
			out = append(out, n)
		}
	}
	return out
}

type convergence struct {
	joined, converged   time.Duration // converged 0: not within the wait
	t99                 time.Duration // until 99% of (member, peer) views were alive
	final               float64       // share of views alive at the end
	heapPerMember       float64
	goroutinesPerMember float64
}

func converge(b *testing.B, n int) convergence {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	tune := meshTune(b)
	heap0, g0 := heapInUse(), runtime.NumGoroutine()
	meshes := make([]*gossip.Mesh, 0, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	start := time.Now()
	for i := range n {
		// Like agents given a few seeds: up to three earlier members,
		// which have joined (each start waits for the previous join).
		var seeds []string
		for _, j := range rand.Perm(i)[:min(i, 3)] {
			seeds = append(seeds, meshes[j].Addr())
		}
		cfg := gossip.Config{Name: fmt.Sprintf("m%03d", i), BindAddr: "127.0.0.1", Token: []byte("bench"), Logger: log, Seeds: seeds, Tune: tune,
			Meta: gossip.Meta{Roles: []string{"worker"}, Version: "bench", Health: gossip.HealthOK}}
		m, err := gossip.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Start(); err != nil {
			b.Fatal(err)
		}
		meshes = append(meshes, m)
		wg.Add(1)
		go func() { defer wg.Done(); _ = m.Run(ctx) }() // joins its seeds, retrying
		// Paced like a fleet coming up: the next member starts once this
		// one has joined (or after 200 ms, if it is slow to).
		if i > 0 {
			// Past the 200 ms the next one starts anyway: the error is no failure.
			_ = testwait.Until(ctx, clockwork.NewRealClock(), 200*time.Millisecond, 5*time.Millisecond, func() (bool, string) {
				return m.StateCounts()[gossip.Alive] >= 2, "not joined"
			})
		}
	}
	r := convergence{joined: time.Since(start)}
	var trace []string // alive % every 30 s
	// Counted every 500 ms: counting is cheap, but not free at 500x500.
	err := testwait.Until(ctx, clockwork.NewRealClock(), *flagConvergeMin, 500*time.Millisecond, func() (bool, string) {
		f := aliveFraction(meshes)
		r.final = f
		if s := time.Since(start); s >= time.Duration(len(trace)+1)*30*time.Second {
			trace = append(trace, fmt.Sprintf("%.0fs %.1f%%", s.Seconds(), 100*f))
		}
		if f >= 0.99 && r.t99 == 0 {
			r.t99 = time.Since(start)
		}
		if f == 1 {
			r.converged = time.Since(start)
			return true, ""
		}
		return false, fmt.Sprintf("%.2f%% of views alive", 100*f)
	})
	if err != nil {
		b.Logf("%d members: not converged within %s; %.2f%% of views alive (%s)", n, *flagConvergeMin, 100*r.final, missing(meshes))
	}
	b.Logf("%d members: alive views over time: %s", n, strings.Join(trace, ", "))
	r.heapPerMember = float64(heapInUse()-heap0) / float64(n)
	r.goroutinesPerMember = float64(runtime.NumGoroutine()-g0) / float64(n)
	return r
}

// aliveFraction is the share of (member, peer) views that are alive.
func aliveFraction(ms []*gossip.Mesh) float64 {
	alive := 0
	for _, m := range ms {
		alive += m.StateCounts()[gossip.Alive]
	}
	return float64(alive) / float64(len(ms)*len(ms))
}

func heapInUse() uint64 {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.HeapInuse
}

// missing describes the first member that does not see all alive.
func missing(ms []*gossip.Mesh) string {
	for i, m := range ms {
		counts := m.StateCounts()
		if counts[gossip.Alive] != len(ms) {
			return fmt.Sprintf("member %d sees %v", i, counts)
		}
	}
	return "none"
}

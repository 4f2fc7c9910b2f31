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

	"github.com/homystack/nico/pkg/gossip"
)

// BenchmarkGossipConvergence starts meshes of 100 and 500 members in one
// process (lan profile, loopback, each joining through one seed) and
// measures how long until every member sees every other alive, and the
// heap and goroutines each member costs.
func BenchmarkGossipConvergence(b *testing.B) {
	for range b.N {
		tab := &table{}
		tab.add("members", "start all ms", "99% alive ms", "converged ms", "alive % at end", "heap KiB/member", "goroutines/member")
		for _, n := range flagMeshSizes() {
			r := converge(b, n)
			conv := "no"
			if r.converged > 0 {
				conv = fmt.Sprintf("%.0f", ms(r.converged))
			}
			tab.add(n, r.joined, r.t99, conv, fmt.Sprintf("%.2f", 100*r.final), fmt.Sprintf("%.0f", r.heapPerMember/1024), fmt.Sprintf("%.1f", r.goroutinesPerMember))
			b.ReportMetric(ms(r.t99), fmt.Sprintf("alive99-%d-ms", n))
			b.ReportMetric(ms(r.converged), fmt.Sprintf("converge-%d-ms", n))
			b.ReportMetric(r.heapPerMember/1024, fmt.Sprintf("heap-%d-KiB/member", n))
		}
		b.Logf("mesh convergence, lan profile, one process on loopback (from the first start; converged: every member sees every other alive)\n%s", tab)
	}
}

var (
	flagConvergeMin  = flag.Duration("nico.convergeWait", 90*time.Second, "how long a mesh may take to converge")
	flagMeshSizesStr = flag.String("nico.meshSizes", "100,500", "mesh sizes to converge")
)

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
		var seeds []string
		if i > 0 {
			seeds = []string{meshes[rand.IntN(i)].Addr()} // one seed, any earlier member
		}
		m, err := gossip.New(gossip.Config{Name: fmt.Sprintf("m%03d", i), BindAddr: "127.0.0.1", Token: []byte("bench"), Logger: log, Seeds: seeds,
			Meta: gossip.Meta{Roles: []string{"worker"}, Version: "bench", Health: gossip.HealthOK}})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Start(); err != nil {
			b.Fatal(err)
		}
		meshes = append(meshes, m)
		wg.Add(1)
		go func() { defer wg.Done(); _ = m.Run(ctx) }() // joins its seed, retrying
	}
	r := convergence{joined: time.Since(start)}
	deadline := time.Now().Add(*flagConvergeMin)
	for {
		f := aliveFraction(meshes)
		r.final = f
		if f >= 0.99 && r.t99 == 0 {
			r.t99 = time.Since(start)
		}
		if f == 1 {
			r.converged = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			b.Logf("%d members: not converged within %s; %.2f%% of views alive (%s)", n, *flagConvergeMin, 100*f, missing(meshes))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.heapPerMember = float64(heapInUse()-heap0) / float64(n)
	r.goroutinesPerMember = float64(runtime.NumGoroutine()-g0) / float64(n)
	return r
}

// aliveFraction is the share of (member, peer) views that are alive.
func aliveFraction(ms []*gossip.Mesh) float64 {
	alive := 0
	for _, m := range ms {
		for _, s := range m.Nodes() {
			if s.State == gossip.Alive {
				alive++
			}
		}
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
		counts := map[gossip.State]int{}
		for _, s := range m.Nodes() {
			counts[s.State]++
		}
		if counts[gossip.Alive] != len(ms) {
			return fmt.Sprintf("member %d sees %v", i, counts)
		}
	}
	return "none"
}

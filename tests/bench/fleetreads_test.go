package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/statuspage"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagFleetSizes = flag.String("nico.fleetsizes", "100,300,1000", "fleet sizes BenchmarkFleetReads fills the store with")
	flagReadReps   = flag.Int("nico.readreps", 7, "calls of each read BenchmarkFleetReads measures (the median is reported)")
)

// BenchmarkFleetReads measures what an operator's reads cost against a
// store filled with a fleet of N machines (fillFleet: nodes, heartbeats,
// generations, rollouts and their operations): `nicoctl get nodes` and
// `nicoctl events`, the real binary run as an operator runs it (process
// start and connection included; its CPU from the child's rusage), the
// same reads in this process (the library calls the commands make, for
// their allocations), and the status page's time to first byte and to
// the whole page for a fresh connection to the real server on loopback.
// Each is beside a baseline in the same run: a plain clientv3 read of the
// keys it reads, and for the binary `nicoctl get ops` (process start,
// connection and a read that does not grow with N). The parent logs the
// log-log slope of each figure across N (1: linear).
//
//	go test -count=1 -run '^$' -bench FleetReads -benchtime 1x ./tests/bench/
func BenchmarkFleetReads(b *testing.B) {
	sizes, err := parseSizes(*flagFleetSizes)
	if err != nil {
		b.Fatal(err)
	}
	bin := buildNicoctl(b)
	results := map[int]map[string]float64{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				results[n] = fleetReads(b, bin, n)
			}
		})
	}
	if len(sizes) < 2 || results[sizes[0]] == nil || results[sizes[len(sizes)-1]] == nil {
		return
	}
	lo, hi := sizes[0], sizes[len(sizes)-1]
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(results[hi])) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, slope(results[lo][k], results[hi][k], lo, hi)))
	}
	b.Logf("log-log slope N=%d..%d (1 linear, 2 quadratic): %s", lo, hi, strings.Join(parts, ", "))
}

// slope is d log(v) / d log(N) between two sizes.
func slope(v0, v1 float64, n0, n1 int) float64 {
	if v0 <= 0 || v1 <= 0 {
		return math.NaN()
	}
	return math.Log(v1/v0) / math.Log(float64(n1)/float64(n0))
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < controlPlane {
			return nil, fmt.Errorf("-nico.fleetsizes %q: want sizes of at least %d separated by commas, as 100,300,1000", s, controlPlane)
		}
		out = append(out, n)
	}
	return out, nil
}

// buildNicoctl builds the nicoctl binary once for the run.
func buildNicoctl(b *testing.B) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "nicoctl")
	cmd := exec.Command("go", "build", "-o", out, "github.com/homystack/nico/coordinator/cmd/nicoctl")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build nicoctl: %v\n%s", err, msg)
	}
	return out
}

// call is one measured read: its wall time, and its CPU and allocations
// where they are known.
type call struct {
	wall, cpu time.Duration
	allocs    uint64
	bytes     int
	lines     int
}

// medianCall is the call of median wall time of reps runs of f.
func medianCall(b *testing.B, reps int, f func() call) call {
	cs := make([]call, reps)
	for i := range cs {
		cs[i] = f()
	}
	slices.SortFunc(cs, func(x, y call) int { return int(x.wall - y.wall) })
	return cs[len(cs)/2]
}

// inProcess measures f in this process: wall time and heap allocations.
func inProcess(b *testing.B, f func() int) call {
	a0, _ := fleetkit.HeapAllocs()
	t0 := time.Now()
	n := f()
	wall := time.Since(t0)
	a1, _ := fleetkit.HeapAllocs()
	return call{wall: wall, allocs: a1 - a0, bytes: n}
}

func fleetReads(b *testing.B, bin string, n int) map[string]float64 {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	c := etcdtest.StartWith(b, etcdtest.Options{Members: 1, TLS: true})
	id := etcdtest.IssueFiles(b, b.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	cli := etcdtest.NewClient(b, c.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	fillFleet(ctx, b, st, fleetShape{n: n, generations: 4, ca: etcdtest.PKI(b), now: time.Now().UTC()})
	reps := max(*flagReadReps, 1)

	// The binary, as an operator runs it.
	nicoctl := func(args ...string) func() call {
		return func() call {
			var out, errOut bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "60s",
				"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key}, args...)...)
			cmd.Env = append(os.Environ(), "HOME="+b.TempDir(), "NICO_CONFIG=")
			cmd.Stdout, cmd.Stderr = &out, &errOut
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatalf("nicoctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
			}
			wall := time.Since(t0)
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			return call{wall: wall, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), bytes: out.Len(), lines: bytes.Count(out.Bytes(), []byte("\n"))}
		}
	}
	getNodes := medianCall(b, reps, nicoctl("get", "nodes"))
	evs := medianCall(b, reps, nicoctl("events"))
	getOps := medianCall(b, reps, nicoctl("get", "ops"))
	if getNodes.lines != n+1 {
		b.Fatalf("nicoctl get nodes printed %d lines, want %d", getNodes.lines, n+1)
	}

	// The same reads in this process, for their allocations.
	libNodes := medianCall(b, reps, func() call {
		return inProcess(b, func() int {
			nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := st.Alive(ctx); err != nil {
				b.Fatal(err)
			}
			if err := st.Get(ctx, store.LivenessKey, api.NewLiveness()); err != nil {
				b.Fatal(err)
			}
			return len(nodes)
		})
	})
	var nEvents int
	libEvents := medianCall(b, reps, func() call {
		return inProcess(b, func() int {
			evs, bad, err := events.NewFeed(st, time.Now).Backlog(ctx)
			if err != nil || len(bad) > 0 {
				b.Fatalf("events backlog: %v %v", err, bad)
			}
			nEvents = len(evs)
			return len(evs)
		})
	})
	raw := func(keys ...string) func() call {
		return func() call {
			return inProcess(b, func() int {
				kvs := 0
				for _, k := range keys {
					opts := []clientv3.OpOption{}
					if strings.HasSuffix(k, "/") {
						opts = append(opts, clientv3.WithPrefix())
					}
					resp, err := st.Client().Get(ctx, k, opts...)
					if err != nil {
						b.Fatal(err)
					}
					kvs += len(resp.Kvs)
				}
				return kvs
			})
		}
	}
	rawNodes := medianCall(b, reps, raw(store.NodesDir, store.HeartbeatsDir, store.LivenessKey))
	start, end := events.Range()
	rawEvents := medianCall(b, reps, func() call {
		return inProcess(b, func() int {
			resp, err := st.Client().Get(ctx, start, clientv3.WithRange(end))
			if err != nil {
				b.Fatal(err)
			}
			return len(resp.Kvs)
		})
	})

	// The status page, from a fresh connection each time.
	srv := &statuspage.Server{Listen: "127.0.0.1:0", Hub: &statuspage.Hub{Store: st, Log: benchLogger(b)}, Log: benchLogger(b)}
	sctx, stopSrv := context.WithCancel(ctx)
	stop, err := srv.Start(sctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { stopSrv(); stop() }()
	url := "http://" + srv.Addr() + "/"
	var ttfb []time.Duration
	page := medianCall(b, reps, func() call {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		var first time.Time
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}), "GET", url, nil)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status page: %d %v", resp.StatusCode, err)
		}
		wall := time.Since(t0)
		ttfb = append(ttfb, first.Sub(t0))
		return call{wall: wall, bytes: len(body)}
	})
	libPage := medianCall(b, reps, func() call {
		return inProcess(b, func() int {
			v, err := statuspage.Read(ctx, st, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			body, err := statuspage.RenderPage(v)
			if err != nil {
				b.Fatal(err)
			}
			return len(body)
		})
	})
	rawPage := medianCall(b, reps, raw(store.NodesDir, store.LivenessKey, store.NixosConfigsDir, store.RolloutsDir, store.PoolsDir, store.ClaimsDir, store.ClustersDir))
	ttfbMed := summarize(ttfb).p50

	figures := map[string]float64{
		"ms/get-nodes": ms(getNodes.wall), "ms/events": ms(evs.wall), "ms/get-ops": ms(getOps.wall),
		"cpu-ms/get-nodes": ms(getNodes.cpu), "cpu-ms/events": ms(evs.cpu),
		"allocs/get-nodes-reads": float64(libNodes.allocs), "allocs/events-backlog": float64(libEvents.allocs), "allocs/page": float64(libPage.allocs),
		"ms/page-ttfb": ms(ttfbMed), "ms/page": ms(page.wall),
		"ms/raw-nodes": ms(rawNodes.wall), "ms/raw-events": ms(rawEvents.wall), "ms/raw-page": ms(rawPage.wall),
		"events": float64(nEvents),
	}
	for _, k := range slices.Sorted(maps.Keys(figures)) {
		b.ReportMetric(figures[k], k)
	}
	b.Logf("N=%d, %d events, median of %d: nicoctl get nodes %.1f ms (cpu %.1f), events %.1f ms (cpu %.1f), floor get ops %.1f ms; in process: nodes' reads %.2f ms %d allocs (raw %.2f ms, x%.1f), events backlog %.2f ms %d allocs (raw %.2f ms, x%.1f); status page first byte %.1f ms, whole %.1f ms %d B, read+render %d allocs (raw %.2f ms, x%.1f)",
		n, nEvents, reps, ms(getNodes.wall), ms(getNodes.cpu), ms(evs.wall), ms(evs.cpu), ms(getOps.wall),
		ms(libNodes.wall), libNodes.allocs, ms(rawNodes.wall), ratio(libNodes.wall, rawNodes.wall),
		ms(libEvents.wall), libEvents.allocs, ms(rawEvents.wall), ratio(libEvents.wall, rawEvents.wall),
		ms(ttfbMed), ms(page.wall), page.bytes, libPage.allocs, ms(rawPage.wall), ratio(ttfbMed, rawPage.wall))
	return figures
}

package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/coordinatortest"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// BenchmarkLeaderReadsPerUnrelatedWrite measures what a write the leader's
// loops do not read costs the leader: the Range requests etcd serves per
// such write (a join endpoint's nonce), beyond the resync ticks. It reads
// etcd's own counter of served Range calls; the resync is set long, so
// the figure is the watches' doing.
//
//	go test -run XXX -bench BenchmarkLeaderReadsPerUnrelatedWrite -benchtime 200x ./coordinator/
func BenchmarkLeaderReadsPerUnrelatedWrite(b *testing.B) {
	cl := etcdtest.StartWith(b, etcdtest.Options{Members: 1})
	cli := etcdtest.NewClient(b, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	wcli := etcdtest.NewClient(b, cl.Endpoints()...)
	wst, err := store.New(wcli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	elected := make(chan struct{}, 1)
	obs := &coordinatortest.Observer{OnLeaderElected: func(store.Fence) { elected <- struct{}{} }}
	c := New(Config{Name: "a", SessionTTL: 60 * time.Second, ResyncInterval: time.Hour, HealthTimeout: time.Second, Observer: obs}, st, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-elected
	metrics := cl.Members[0].ClientURL + "/metrics"
	// Let the first passes of the term finish: wait until etcd serves no
	// Range between two ticks 200ms apart.
	settle := func() float64 {
		last := ranges(b, metrics)
		err := testwait.Until(b.Context(), clockwork.NewRealClock(), time.Minute, 200*time.Millisecond, func() (bool, string) {
			now := ranges(b, metrics)
			quiet := now == last
			last = now
			return quiet, fmt.Sprintf("%v Range calls served, still growing", now)
		})
		if err != nil {
			b.Fatal(err)
		}
		return last
	}
	before := settle()
	if before == 0 {
		b.Fatal("etcd reports no served Range calls; is grpc_server_handled_total in its metrics?")
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := wst.Client().Put(ctx, store.JoinNonceKey(fmt.Sprintf("n%d", i)), "v"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := settle()
	b.ReportMetric((after-before)/float64(b.N), "ranges/write")
}

// ranges is etcd's count of served Range calls.
func ranges(b *testing.B, url string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Range"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				b.Fatal(err)
			}
			n += v
		}
	}
	return n
}

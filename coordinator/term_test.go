package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/coordinatortest"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// TestTermEndsWithItsSessionAndTheNextWaitsItsBackoff: when the leader's
// session lease is revoked, its controller group stops (the records stay,
// not running), and the next campaign starts only once the term loop's
// backoff has passed on the injected clock. (The session sees its lease
// gone at its next keepalive, a third of its TTL: 3 s keeps that short.)
func TestTermEndsWithItsSessionAndTheNextWaitsItsBackoff(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	defer cli.Close()
	cst, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClock()
	terms := make(chan store.Fence, 2)
	obs := &coordinatortest.Observer{OnLeaderElected: func(f store.Fence) { terms <- f }}
	c := New(Config{Name: "a", SessionTTL: 3 * time.Second, Clock: clk, Observer: obs}, cst, slog.New(slog.DiscardHandler))
	defer runInBackground(t, c)()
	var first store.Fence
	select {
	case first = <-terms:
	case <-time.After(20 * time.Second):
		t.Fatal("not elected")
	}
	testwait.True(t, 20*time.Second, "the group running", func() bool { return len(c.Health()) == len(c.leaderControllers(store.Fence{})) && allRunning(c, true) })

	resp, err := st.Client().Get(t.Context(), first.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("election key %s: %v %v", first.Key, resp, err)
	}
	if _, err := st.Client().Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 20*time.Second, "the group stopped with its term", func() bool { return allRunning(c, false) })
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	if err := clk.BlockUntilContext(wctx, 1); err != nil { // the term loop's backoff
		t.Fatal(err)
	}
	if name := leaderOf(t, st); name != "" {
		t.Fatalf("leader %q during the backoff; the next campaign must wait for it", name)
	}
	clk.Advance(time.Second) // the first backoff is 200ms ± 50%
	select {
	case second := <-terms:
		if second == first {
			t.Errorf("the second term has the first's fence %v", first)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no second term after the backoff")
	}
	testwait.True(t, 20*time.Second, "the group running again", func() bool { return allRunning(c, true) })
}

func allRunning(c *Coordinator, running bool) bool {
	for _, h := range c.Health() {
		if h.Running != running {
			return false
		}
	}
	return true
}

// TestTermSurvivesAClosedWatch: when the member the leader talks to loses
// its cluster's leader for a while, etcd closes the leader's watches (they
// require a leader). The controllers watch again once etcd is back; the
// term does not end over it (its session's lease outlives the outage), so
// leadership does not churn. Before the runtime, a closed watch ended the
// membership loop and with it the term: resign, campaign, a second term.
func TestTermSurvivesAClosedWatch(t *testing.T) {
	t.Parallel()
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 3})
	// The candidate talks to m0 only, so that m0's lost leader closes its
	// watches.
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Members[0].ClientURL)
	defer cli.Close()
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	terms := 0
	obs := &coordinatortest.Observer{OnLeaderElected: func(store.Fence) { mu.Lock(); terms++; mu.Unlock() }}
	c := New(Config{Name: "a", SessionTTL: 60 * time.Second, ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second, Observer: obs}, st, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testwait.True(t, 20*time.Second, "the group running", func() bool {
		return len(c.Health()) == len(c.leaderControllers(store.Fence{})) && allRunning(c, true) && c.Healthy()
	})

	// m1 and m2 stop: m0 has no leader, and after a few election timeouts
	// etcd closes the watches that require one.
	var parts []string
	for _, m := range cl.Members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	probe := cli.Watch(clientv3.WithRequireLeader(ctx), "probe")
	for _, m := range cl.Members[1:] {
		m.Close()
	}
	for range probe { // m0 closes every watch that requires a leader at once
	}
	for _, m := range cl.Members[1:] {
		cfg, err := etcdtest.NewConfig(m.Name, m.DataDir, m.PeerURL, m.ClientURL, strings.Join(parts, ","), embed.ClusterStateFlagExisting)
		if err != nil {
			t.Fatal(err)
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatalf("restart %s: %v", m.Name, err)
		}
		t.Cleanup(e.Close)
	}
	back := time.Now()
	testwait.For(t, 20*time.Second, "every controller to watch again and succeed", func() (bool, string) {
		for _, h := range c.Health() {
			if !h.Running || h.Rewatches == 0 || h.LastSuccess.Before(back) {
				return false, fmt.Sprintf("%s: running %v, %d rewatches, last success %s before the members came back", h.Name, h.Running, h.Rewatches, back.Sub(h.LastSuccess))
			}
		}
		return c.Healthy(), "not healthy"
	})
	mu.Lock()
	defer mu.Unlock()
	if terms != 1 {
		t.Errorf("%d terms, want 1: a closed watch must not end the leadership term", terms)
	}
}

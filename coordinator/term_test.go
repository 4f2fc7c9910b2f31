package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTermEndsWithItsSessionAndTheNextWaitsItsBackoff: when the leader's
// session lease is revoked, its controller group stops (the records stay,
// not running), and the next campaign starts only once the term loop's
// backoff has passed on the injected clock. (The session sees its lease
// gone at its next keepalive, a third of its TTL: 3 s keeps that short.)
func TestTermEndsWithItsSessionAndTheNextWaitsItsBackoff(t *testing.T) {
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
	c := New(Config{Name: "a", SessionTTL: 3 * time.Second, Clock: clk}, cst, slog.New(slog.DiscardHandler))
	terms := make(chan store.Fence, 2)
	c.Elected = func(f store.Fence) { terms <- f }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var first store.Fence
	select {
	case first = <-terms:
	case <-time.After(20 * time.Second):
		t.Fatal("not elected")
	}
	poll(t, "the group running", func() bool { return len(c.Health()) == 4 && allRunning(c, true) })

	resp, err := st.Client().Get(t.Context(), first.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("election key %s: %v %v", first.Key, resp, err)
	}
	if _, err := st.Client().Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	poll(t, "the group stopped with its term", func() bool { return allRunning(c, false) })
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
	poll(t, "the group running again", func() bool { return allRunning(c, true) })
}

func allRunning(c *Coordinator, running bool) bool {
	for _, h := range c.Health() {
		if h.Running != running {
			return false
		}
	}
	return true
}

// poll waits for cond (a condition, polled; not a delay).
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

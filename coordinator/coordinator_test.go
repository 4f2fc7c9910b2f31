package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

type candidate struct {
	c      *Coordinator
	cancel context.CancelFunc
	done   chan error
	cli    *clientv3.Client
}

func startCandidate(t *testing.T, cl *etcdtest.Cluster, name string, ttl time.Duration, opts ...func(*Config)) *candidate {
	t.Helper()
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Name: name, SessionTTL: ttl, ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	c := New(cfg, st, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	cd := &candidate{c: c, cancel: cancel, done: make(chan error, 1), cli: cli}
	go func() { cd.done <- c.Run(ctx) }()
	return cd
}

func (cd *candidate) stop(t *testing.T) {
	t.Helper()
	cd.cancel()
	select {
	case err := <-cd.done:
		cd.cli.Close()
		if err != nil {
			t.Fatalf("Run returned %v after cancel", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func leaderOf(t *testing.T, st *store.Store) string {
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.CallBudget)
	defer cancel()
	name, err := Leader(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func waitLeader(t *testing.T, st *store.Store, within time.Duration, ok func(string) bool) string {
	t.Helper()
	var name string
	testwait.For(t, within, "the leader to change as wanted", func() (bool, string) {
		name = leaderOf(t, st)
		return ok(name), fmt.Sprintf("leader %q", name)
	})
	return name
}

// waitCampaigners waits until n candidates have campaign keys.
func waitCampaigners(t *testing.T, st *store.Store, n int, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := st.Client().Get(ctx, store.ElectionPrefix, clientv3.WithPrefix())
		if err == nil && len(resp.Kvs) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want %d campaign keys within %s, got %v (%v)", n, within, resp, err)
		case <-tick.C:
		}
	}
}

// TestOneLeaderAndResignOnShutdown: of three candidates one leads; when it
// stops it resigns, so the next takes over at once rather than after the
// session TTL (60 s here). Stopped candidates leave no goroutine behind.
func TestOneLeaderAndResignOnShutdown(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	leaderOf(t, st) // warm the client up before the goroutine snapshot
	ignore := goleak.IgnoreCurrent()

	cands := map[string]*candidate{}
	for _, n := range []string{"a", "b", "c"} {
		cands[n] = startCandidate(t, cl, n, 60*time.Second)
	}
	first := waitLeader(t, st, 20*time.Second, func(n string) bool { return n != "" })
	// Every candidate campaigns (the first may lead before the others
	// have their sessions).
	waitCampaigners(t, st, 3, 20*time.Second)
	cands[first].stop(t)
	second := waitLeader(t, st, 10*time.Second, func(n string) bool { return n != "" && n != first })
	if !strings.Contains("abc", second) {
		t.Fatalf("leader %q", second)
	}
	for n, cd := range cands {
		if n != first {
			cd.stop(t)
		}
	}
	if n := leaderOf(t, st); n != "" {
		t.Fatalf("leader %q left after every candidate stopped", n)
	}
	goleak.VerifyNone(t, append(leakcheck.WhileServing(), ignore)...)
}

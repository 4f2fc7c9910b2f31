package bench

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagGossipRuns = flag.Int("nico.gossipRuns", 10, "kills measured per gossip profile")
	flagLeaseTTL   = flag.Duration("nico.leaseTTL", 10*time.Second, "heartbeat lease TTL measured beside gossip (the agent's default heartbeat.ttl)")
)

// BenchmarkGossipKillToDead measures the time from a crash of a node (its
// mesh member stops without leaving, its lease keep-alive stops: what
// kill -9 of the agent does) until the coordinator's mesh member sees it
// dead, for the lan and fast profiles, beside the time until its
// heartbeat lease expires in etcd, measured on the same kills.
func BenchmarkGossipKillToDead(b *testing.B) {
	for range b.N {
		cl := etcdtest.Start(b, 1)
		cli := cl.Client(b)
		tab := &table{}
		tab.add("profile", "runs", "gossip p50 ms", "gossip p95 ms", "gossip max ms", "lease p50 ms", "lease p95 ms", "lease/gossip p50")
		for _, p := range []gossip.Profile{gossip.ProfileLAN, gossip.ProfileFast} {
			g, l := killToDead(b, cli, p, *flagGossipRuns)
			sg, sl := summarize(g), summarize(l)
			tab.add(string(p), sg.n, sg.p50, sg.p95, sg.max, sl.p50, sl.p95, ratio(sl.p50, sg.p50))
			b.ReportMetric(ms(sg.p50), string(p)+"-dead-p50-ms")
			b.ReportMetric(ms(sg.p95), string(p)+"-dead-p95-ms")
			b.ReportMetric(ms(sl.p50), string(p)+"-lease-p50-ms")
		}
		b.Logf("kill -9 to dead: 5-member mesh on loopback, lease TTL %s\n%s", *flagLeaseTTL, tab)
	}
}

// killToDead kills runs victims of a 5-member mesh of profile p and
// returns, per kill, the time until the observer saw it dead and the time
// until its lease expired.
func killToDead(b *testing.B, cli *clientv3.Client, p gossip.Profile, runs int) (gossipDead, leaseGone []time.Duration) {
	b.Helper()
	log := benchLogger(b)
	start := func(name, ip string, seeds ...string) *gossip.Mesh {
		m, err := gossip.New(gossip.Config{Name: name, BindAddr: ip, Profile: p, Token: []byte("bench"), Seeds: seeds, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Start(); err != nil {
			b.Fatal(err)
		}
		if len(seeds) > 0 {
			if _, err := m.Join(seeds); err != nil {
				b.Fatal(err)
			}
		}
		return m
	}
	observer := start("coordinator", "127.0.0.70")
	defer observer.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pollLoop(ctx, observer, p) // what Mesh.Run does besides joining
	for i := range 3 {
		m := start(fmt.Sprintf("steady-%d", i), fmt.Sprintf("127.0.0.%d", 71+i), observer.Addr())
		defer m.Shutdown()
		mctx, mcancel := context.WithCancel(ctx)
		defer mcancel()
		go pollLoop(mctx, m, p)
	}
	for run := range runs {
		name := fmt.Sprintf("victim-%s-%d", p, run)
		victim := start(name, "127.0.0.75", observer.Addr())
		lease, err := cli.Grant(ctx, int64(flagLeaseTTL.Seconds()))
		if err != nil {
			b.Fatal(err)
		}
		key := "/bench/heartbeats/" + name
		if _, err := cli.Put(ctx, key, "", clientv3.WithLease(lease.ID)); err != nil {
			b.Fatal(err)
		}
		kctx, stopKeepAlive := context.WithCancel(ctx)
		if _, err := cli.KeepAlive(kctx, lease.ID); err != nil {
			b.Fatal(err)
		}
		waitState(b, observer, name, gossip.Alive, 60*time.Second)
		// A deliberate pause, not a wait for a condition: the kill is timed
		// from a member that has been in the observers' probe rotation for a
		// while (memberlist shows nothing to wait on for that).
		time.Sleep(2 * time.Second)
		watch := cli.Watch(ctx, key)
		gone := make(chan time.Time, 1)
		go func() {
			for resp := range watch {
				if len(resp.Events) > 0 && resp.Events[0].Type == clientv3.EventTypeDelete {
					gone <- time.Now()
					return
				}
			}
		}()

		killed := time.Now()
		_ = victim.Shutdown()
		stopKeepAlive()
		deadAt := waitState(b, observer, name, gossip.Dead, 2*time.Minute)
		gossipDead = append(gossipDead, deadAt.Sub(killed))
		leaseGone = append(leaseGone, (<-gone).Sub(killed))
	}
	return gossipDead, leaseGone
}

// pollLoop reads m's state as Mesh.Run does.
func pollLoop(ctx context.Context, m *gossip.Mesh, p gossip.Profile) {
	t := time.NewTicker(p.PollInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Nodes()
		}
	}
}

// waitState polls until m sees name in state s and returns when.
func waitState(b *testing.B, m *gossip.Mesh, name string, s gossip.State, within time.Duration) time.Time {
	b.Helper()
	var at time.Time
	err := testwait.Until(b.Context(), clockwork.NewRealClock(), within, 5*time.Millisecond, func() (bool, string) {
		n, ok := m.Node(name)
		at = time.Now()
		return ok && n.State == s, fmt.Sprintf("state %q", n.State)
	})
	if err != nil {
		b.Fatalf("%s not %s: %v", name, s, err)
	}
	return at
}

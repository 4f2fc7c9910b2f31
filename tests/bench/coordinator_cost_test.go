package bench

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
)

var (
	flagIdle     = flag.Duration("nico.idle", 20*time.Second, "how long BenchmarkCoordinatorCost lets the leader idle (reported per minute)")
	flagCostJoin = flag.Int("nico.costjoins", 2, "joins BenchmarkCoordinatorCost measures")
)

// BenchmarkCoordinatorCost measures what the coordinator itself costs: CPU
// time (getrusage of this process) and heap allocations (runtime/metrics)
// while the leader idles over a 3-member cluster, reported per minute, and
// per join of a learner to a voter. The etcd members are etcd binaries in
// child processes (NICO_ETCD_BINARIES or .cache/etcd; the newest is used), so
// this process runs only the coordinator, its client and this harness's
// waits; its client keeps its endpoints in sync every 5 s as
// nico-coordinator's does.
//
//	go test -count=1 -run '^$' -bench CoordinatorCost -benchtime 1x ./tests/bench/
func BenchmarkCoordinatorCost(b *testing.B) {
	bins := etcdtest.Binaries(b)
	bin := bins[len(bins)-1]
	for range b.N {
		idle, joins := coordinatorCost(b, bin)
		perMin := time.Minute.Seconds() / idle.wall.Seconds()
		b.Logf("etcd %s; idle %s: cpu %s, %d allocs, %d B; %d joins: cpu %s, %d allocs, %d B",
			bin.Version, idle.wall.Round(time.Millisecond), idle.cpu, idle.allocs, idle.bytes, *flagCostJoin, joins.cpu, joins.allocs, joins.bytes)
		n := float64(*flagCostJoin)
		b.ReportMetric(idle.cpu.Seconds()*1000*perMin, "cpu-ms/idle-min")
		b.ReportMetric(float64(idle.allocs)*perMin, "allocs/idle-min")
		b.ReportMetric(float64(idle.bytes)*perMin/1024, "KiB/idle-min")
		b.ReportMetric(joins.cpu.Seconds()*1000/n, "cpu-ms/join")
		b.ReportMetric(float64(joins.allocs)/n, "allocs/join")
		b.ReportMetric(float64(joins.bytes)/n/1024, "KiB/join")
		b.ReportMetric(joins.wall.Seconds()*1000/n, "wall-ms/join")
	}
}

// cost is what one measured interval took.
type cost struct {
	wall          time.Duration
	cpu           time.Duration
	allocs, bytes uint64
}

type meter struct {
	t0      time.Time
	cpu0    time.Duration
	a0, by0 uint64
}

func startMeter() meter {
	a, by := fleetkit.HeapAllocs()
	return meter{t0: time.Now(), cpu0: fleetkit.ProcessCPU(), a0: a, by0: by}
}

func (m meter) stop() cost {
	a, by := fleetkit.HeapAllocs()
	return cost{wall: time.Since(m.t0), cpu: fleetkit.ProcessCPU() - m.cpu0, allocs: a - m.a0, bytes: by - m.by0}
}

// coordinatorCost starts three members and one coordinator, lets the leader
// idle for -nico.idle, then joins -nico.costjoins learners one at a time.
func coordinatorCost(b *testing.B, bin etcdtest.Binary) (idle, joins cost) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	var eps []string
	ms := fleetkit.StartBinaryCluster(ctx, b, bin, 3)
	for _, m := range ms {
		eps = append(eps, m.Client)
	}
	cli := etcdtest.NewClient(b, eps...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range ms {
		fleetkit.RegisterMember(ctx, b, st, m.Name, m.Peer, m.Client)
	}

	coordCli := etcdtest.Dial(b, pki.RootIdentity, 5*time.Second, eps...)
	defer coordCli.Close()
	cst, err := store.New(coordCli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	fleetkit.SetVoters(b, cst, 7)
	c := coordinator.New(coordinator.Config{Name: "cp-0", SessionTTL: 10 * time.Second, Policy: learnerPolicy, HealthTimeout: healthTimeout}, cst, benchLogger(b))
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	for {
		name, err := coordinator.Leader(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		if name != "" {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatal("no coordinator leader")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Let the first passes after the election settle before measuring.
	<-time.After(2 * time.Second)

	m := startMeter()
	<-time.After(*flagIdle)
	idle = m.stop()

	m = startMeter()
	for i := range *flagCostJoin {
		if err := costJoin(ctx, b, bin, st, fmt.Sprintf("cp-%d", 3+i)); err != nil {
			b.Fatal(err)
		}
	}
	joins = m.stop()
	return idle, joins
}

// costJoin does what a joining agent does: registers, files a join request,
// starts its member with the initial cluster the leader answers, and waits
// until the leader says it joined.
func costJoin(ctx context.Context, tb testing.TB, bin etcdtest.Binary, st *store.Store, name string) error {
	peer, client := etcdtest.URLs(tb)
	fleetkit.RegisterMember(ctx, tb, st, name, peer, client)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := st.Client().Watch(wctx, store.JoinKey(name))
	j := api.NewJoinRequest(name)
	j.Spec = api.JoinRequestSpec{Node: name, PeerURL: peer, ClientURL: client, Attempt: 1}
	if err := st.Put(ctx, store.JoinKey(name), j); err != nil {
		return err
	}
	started := false
	for {
		got := api.NewJoinRequest(name)
		if err := st.Get(ctx, store.JoinKey(name), got); err != nil {
			return err
		}
		switch got.Status.Phase {
		case api.JoinLearnerAdded:
			if !started {
				if _, err := fleetkit.StartBinaryMember(ctx, tb, bin, name, peer, client, got.Status.InitialCluster, member.StateExisting); err != nil {
					return err
				}
				started = true
			}
		case api.JoinJoined:
			return nil
		case api.JoinFailed:
			return fmt.Errorf("join %s failed: %s", name, got.Status.Message)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join %s: %w", name, ctx.Err())
		case <-events:
		}
	}
}

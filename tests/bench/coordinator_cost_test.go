package bench

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	a, by := heapAllocs()
	return meter{t0: time.Now(), cpu0: processCPU(), a0: a, by0: by}
}

func (m meter) stop() cost {
	a, by := heapAllocs()
	return cost{wall: time.Since(m.t0), cpu: processCPU() - m.cpu0, allocs: a - m.a0, bytes: by - m.by0}
}

// processCPU is this process's user and system time; children (the etcd
// members) are not in it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// costMember is one etcd child process of the measured cluster.
type costMember struct {
	name, peer, client string
	rt                 member.Runtime
}

func startCostMember(ctx context.Context, tb testing.TB, bin etcdtest.Binary, name, peer, client, initial, state string) (*costMember, error) {
	m := &costMember{name: name, peer: peer, client: client, rt: fleetkit.ExecRuntime(bin.Path)}
	cfg := member.Config{
		Name: name, DataDir: filepath.Join(tb.TempDir(), "etcd"), PeerURL: peer, ClientURL: client,
		InitialCluster: initial, ClusterState: state, ClusterToken: "cost", TLS: etcdtest.MemberTLS(tb, name, peer, client),
	}
	tb.Cleanup(func() { _ = m.rt.Stop(context.Background()) })
	if err := m.rt.Start(ctx, cfg); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return m, nil
}

// coordinatorCost starts three members and one coordinator, lets the leader
// idle for -nico.idle, then joins -nico.costjoins learners one at a time.
func coordinatorCost(b *testing.B, bin etcdtest.Binary) (idle, joins cost) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	var names, parts []string
	urls := map[string][2]string{}
	for i := range 3 {
		name := fmt.Sprintf("cp-%d", i)
		peer, client := etcdtest.URLs(b)
		names, parts = append(names, name), append(parts, name+"="+peer)
		urls[name] = [2]string{peer, client}
	}
	initial := strings.Join(parts, ",")
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	var eps []string
	for _, name := range names {
		eps = append(eps, urls[name][1])
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := startCostMember(ctx, b, bin, name, urls[name][0], urls[name][1], initial, member.StateNew)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	cli := etcdtest.NewClient(b, eps...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range names {
		registerNode(ctx, b, st, name, urls[name][0], urls[name][1])
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

// registerNode writes what an agent writes for a control-plane node: its
// record and a heartbeat on a lease.
func registerNode(ctx context.Context, tb testing.TB, st *store.Store, name, peer, client string) {
	tb.Helper()
	n := api.NewNode(name)
	n.Spec = api.NodeSpec{Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}
	if err := st.Put(ctx, store.NodeKey(name), n); err != nil {
		tb.Fatal(err)
	}
	lease, err := st.Client().Grant(ctx, 600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.HeartbeatKey(name), "", clientv3.WithLease(lease.ID)); err != nil {
		tb.Fatal(err)
	}
}

// costJoin does what a joining agent does: registers, files a join request,
// starts its member with the initial cluster the leader answers, and waits
// until the leader says it joined.
func costJoin(ctx context.Context, tb testing.TB, bin etcdtest.Binary, st *store.Store, name string) error {
	peer, client := etcdtest.URLs(tb)
	registerNode(ctx, tb, st, name, peer, client)
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
				if _, err := startCostMember(ctx, tb, bin, name, peer, client, got.Status.InitialCluster, member.StateExisting); err != nil {
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

package bench

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/placement"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// BenchmarkMachinePool measures machine pools on libvirt's test driver
// (in process, no daemon) with real etcd: the time from writing a pool of
// 50 machines to all 50 running (leader placement, two hosts' controllers
// defining and starting domains, status written back), and the CPU of one
// reconcile pass of a host with 200 domains and nothing to do, beside the
// CPU of only listing those 200 domains from libvirt (the floor any
// reconciler pays) in the same run.
func BenchmarkMachinePool(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchPool50(b)
		benchPass200(b)
	}
}

func mpStore(b *testing.B) *store.Store {
	c := etcdtest.Start(b, 1)
	st, err := store.New(etcdtest.NewClient(b, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func benchPool50(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := mpStore(b)
	log := logging.Test(b)
	co := coordinator.New(coordinator.Config{Name: "c-1", SessionTTL: 5 * time.Second, ResyncInterval: 200 * time.Millisecond}, st, log)
	cdone := make(chan error, 1)
	go func() { cdone <- co.Run(ctx) }()
	defer func() { cancel(); <-cdone }()
	var hdone []chan error
	for _, name := range []string{"hv-1", "hv-2"} {
		if _, err := st.Client().Put(ctx, store.HeartbeatKey(name), "alive"); err != nil {
			b.Fatal(err)
		}
		hv := libvirt.New(libvirttest.URI(b, libvirttest.Options{VCPUs: 64, MemoryMiB: 64 << 10}), log)
		defer hv.Close()
		c := hypervisor.New(hypervisor.Config{Node: name, Resync: 200 * time.Millisecond}, st, hv, log)
		d := make(chan error, 1)
		go func() { d <- c.Run(ctx) }()
		hdone = append(hdone, d)
	}
	defer func() {
		cancel()
		for _, d := range hdone {
			<-d
		}
	}()
	// Both hosts reported before the clock starts.
	testwait.For(b, time.Minute, "both hosts reported", func() (bool, string) {
		hs, _, err := store.List[api.Hypervisor](ctx, st, store.HypervisorsDir)
		if err != nil {
			b.Fatal(err)
		}
		return len(hs) == 2, fmt.Sprintf("%d hosts reported", len(hs))
	})
	pool := api.NewMachinePool("web")
	pool.Spec = api.MachinePoolSpec{Count: 50, Spread: true, Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 512, DiskGiB: 1, BaseImage: "base.qcow2", Network: "default"}}
	t0 := time.Now()
	if err := st.Put(ctx, store.PoolKey("web"), pool); err != nil {
		b.Fatal(err)
	}
	// Re-checked every 5ms: the figure is this wait's length.
	err := testwait.Until(ctx, clockwork.NewRealClock(), 10*time.Minute, 5*time.Millisecond, func() (bool, string) {
		ms, _, err := store.List[api.Machine](ctx, st, store.MachinesDir)
		if err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, m := range ms {
			if m.Status.Phase == api.MachineRunning {
				running++
			}
		}
		return running == 50, fmt.Sprintf("%d of 50 running", running)
	})
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	b.Logf("pool of 50 machines from nothing to running on 2 test-driver hosts: %v", d.Round(time.Millisecond))
	b.ReportMetric(d.Seconds(), "s/pool50-to-running")
}

func benchPass200(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := mpStore(b)
	hv := libvirt.New(libvirttest.URI(b, libvirttest.Options{VCPUs: 512, MemoryMiB: 512 << 10, ExtraPools: []string{"pool-1", "pool-2"}}), logging.Test(b))
	defer hv.Close()
	c := hypervisor.New(hypervisor.Config{Node: "hv-1"}, st, hv, logging.Test(b))
	for i := 0; i < 200; i++ {
		m := api.NewMachine(placement.MachineName("web", i))
		m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: "web", Ordinal: i, Host: "hv-1", UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 512, DiskGiB: 1, BaseImage: "base.qcow2", Network: "default",
				StoragePool: []string{"default", "pool-1", "pool-2"}[i%3]}} // the test driver's pools hold 100 GiB
		if err := st.Put(ctx, store.MachineKey(m.Metadata.Name), m); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.Once(ctx); err != nil {
		b.Fatal(err)
	}
	if as, err := c.Once(ctx); err != nil || len(as) != 0 {
		b.Fatalf("second pass: %d actions, %v", len(as), err)
	}
	const passes = 20
	list := cpu(func() {
		for i := 0; i < passes; i++ {
			if ds, err := hv.Domains(ctx); err != nil || len(ds) != 200 {
				b.Fatalf("%d domains, %v", len(ds), err)
			}
		}
	})
	pass := cpu(func() {
		for i := 0; i < passes; i++ {
			if as, err := c.Once(ctx); err != nil || len(as) != 0 {
				b.Fatalf("pass: %d actions, %v", len(as), err)
			}
		}
	})
	perList, perPass := list/passes, pass/passes
	b.Logf("CPU per reconcile pass, 200 domains, nothing to do: %v (listing the domains alone: %v; pass/list %.2f)",
		perPass.Round(10*time.Microsecond), perList.Round(10*time.Microsecond), float64(perPass)/float64(perList))
	b.ReportMetric(float64(perPass.Microseconds())/1000, "cpu-ms/pass200")
	b.ReportMetric(float64(perList.Microseconds())/1000, "cpu-ms/list200")
}

// cpu returns the process's user+system CPU time spent in f (the embedded
// etcd serving the pass is in the process too).
func cpu(f func()) time.Duration {
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	f()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(r1.Utime) - tv(r0.Utime) + tv(r1.Stime) - tv(r0.Stime)
}

package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	agenthv "github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// BenchmarkEtcdVotersWithVMs measures an EtcdCluster of one voter raised to
// spec.voters 3 with a machine pool over two libvirt test-driver hosts:
// from writing the spec to three voters, beside the VMs' own part in the
// same run. A test-driver domain runs no guest: a VM "boots" when its
// machine is Running, by starting its agent, so its own part is from then
// until its node registered (the agent's start and registration; a real
// guest adds its firmware and kernel). nico's share is the rest: the claim,
// the placement, the domains defined and started, and each VM from
// registered to voter (learner added, caught up, promoted).
func BenchmarkEtcdVotersWithVMs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchVotersWithVMs(b)
	}
}

func benchVotersWithVMs(b *testing.B) {
	f := newFleet(b, "cp-1")
	for _, name := range []string{"hv-1", "hv-2"} {
		cfg := f.AgentConfig(name, false)
		cfg.Roles = []api.Role{api.RoleHypervisor}
		hv := libvirt.New(libvirttest.URI(b, libvirttest.Options{VCPUs: 8, MemoryMiB: 8192}), f.Log)
		cfg.Hypervisor = &agenthv.Setup{HV: hv, Config: agenthv.Config{Resync: 200 * time.Millisecond, StopGrace: time.Second}}
		f.Start(cfg)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	testwait.For(b, time.Minute, "both hosts reported", func() (bool, string) {
		hs, _, err := store.List[api.Hypervisor](ctx, f.st, store.HypervisorsDir)
		return err == nil && len(hs) == 2, fmt.Sprintf("%d hosts reported, %v", len(hs), err)
	})
	pool := api.NewMachinePool("vms")
	pool.Spec.Template = api.MachineTemplate{VCPUs: 1, MemoryMiB: 1024, DiskGiB: 4, BaseImage: "base.qcow2", Network: "default"}
	if err := f.st.Put(ctx, store.PoolKey("vms"), pool); err != nil {
		b.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	if err := f.st.Get(ctx, store.EtcdClusterKey, ec); err != nil {
		b.Fatal(err)
	}
	ec.Spec.Voters, ec.Spec.MachinePool = 3, "vms"

	t0 := time.Now()
	if err := f.st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		b.Fatal(err)
	}
	running, registered := map[string]time.Time{}, map[string]time.Time{}
	// Re-checked every 5ms: a machine Running boots (its agent starts).
	err := testwait.Until(ctx, clockwork.NewRealClock(), 5*time.Minute, 5*time.Millisecond, func() (bool, string) {
		ms, _, err := store.List[api.Machine](ctx, f.st, store.MachinesDir)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if name := m.Metadata.Name; m.Status.Phase == api.MachineRunning && running[name].IsZero() {
				running[name] = time.Now()
				f.Start(f.AgentConfig(name, false))
			}
		}
		for name := range running {
			if registered[name].IsZero() {
				if _, err := f.st.GetKV(ctx, store.NodeKey(name)); err == nil {
					registered[name] = time.Now()
				}
			}
		}
		resp, err := f.cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		voters := 0
		for _, m := range resp.Members {
			if !m.IsLearner && m.Name != "" {
				voters++
			}
		}
		return voters == 3, fmt.Sprintf("%d voters, %d VMs running, %d registered", voters, len(running), len(registered))
	})
	if err != nil {
		b.Fatal(err)
	}
	total := time.Since(t0)
	var own time.Duration
	names := make([]string, 0, len(running))
	for name := range running {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := registered[name].Sub(running[name])
		own = max(own, d)
		b.Logf("%s: running %v after the apply, registered %v later", name, running[name].Sub(t0).Round(time.Millisecond), d.Round(time.Millisecond))
	}
	b.Logf("spec.voters 1 -> 3 with VMs from a pool on 2 test-driver hosts: %v in all, the VMs' own boot-to-registered %v, nico's share %v",
		total.Round(time.Millisecond), own.Round(time.Millisecond), (total - own).Round(time.Millisecond))
	b.ReportMetric(total.Seconds(), "s/voters1to3-vms")
	b.ReportMetric(own.Seconds(), "s/vm-boot-to-registered")
	b.ReportMetric((total - own).Seconds(), "s/nico-share")
}

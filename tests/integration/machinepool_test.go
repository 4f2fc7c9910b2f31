package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	agenthv "github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/placement"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// hvHost is a hypervisor host under test: an agent with the hypervisor
// role running its domain controller over a libvirt test-driver host.
type hvHost struct {
	name string
	hv   *libvirt.Hypervisor
}

// startHypervisor runs a hypervisor host's agent, as nico-agent does with
// roles [hypervisor].
func (f *fleet) startHypervisor(name string, o libvirttest.Options) *hvHost {
	h := &hvHost{name: name, hv: libvirt.New(libvirttest.URI(f.t, o), f.Log.With("test-hv", name))}
	cfg := f.AgentConfig(name, false)
	cfg.Roles = []api.Role{api.RoleHypervisor}
	cfg.Hypervisor = &agenthv.Setup{HV: h.hv, Config: agenthv.Config{Resync: 200 * time.Millisecond, StopGrace: time.Second}}
	f.Start(cfg)
	return h
}

func (h *hvHost) domains(t *testing.T) []string {
	ds, err := h.hv.Domains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		if d.State == hypervisor.Running {
			out = append(out, d.Spec.Name)
		}
	}
	return out
}

func (f *fleet) putPool(p *api.MachinePool) {
	f.t.Helper()
	st := f.Store()
	old := api.NewMachinePool(p.Metadata.Name)
	if err := st.Get(f.t.Context(), store.PoolKey(p.Metadata.Name), old); err == nil {
		old.Spec = p.Spec
		p = old
	}
	if err := st.Put(f.t.Context(), store.PoolKey(p.Metadata.Name), p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) machines() map[string]*api.Machine {
	f.t.Helper()
	ms, _, err := store.List[api.Machine](f.t.Context(), f.Store(), store.MachinesDir)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*api.Machine{}
	for _, m := range ms {
		out[m.Metadata.Name] = m
	}
	return out
}

// TestMachinePoolOnLibvirt: a pool of libvirt machines is placed across two
// hypervisor hosts by the leader and created by the hosts' agents; machines
// that do not fit stay Pending saying why; the machines' agents join as
// workers; scaling down removes a machine's node through the safe removal
// before its domain is deleted; a pool naming an unknown network gets a
// clear condition and nothing is created.
func TestMachinePoolOnLibvirt(t *testing.T) {
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	hosts := []*hvHost{
		f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
		f.startHypervisor("hv-2", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
	}
	running := func() []string {
		var all []string
		for _, h := range hosts {
			all = append(all, h.domains(t)...)
		}
		slices.Sort(all)
		return all
	}

	for _, h := range hosts {
		waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey(h.name), h.name+" reported", func(*api.Hypervisor) bool { return true })
	}
	pool := api.NewMachinePool("web")
	pool.Spec = api.MachinePoolSpec{Count: 3, Spread: true, Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 1024, DiskGiB: 4, BaseImage: "base.qcow2", Network: "default"}}
	f.putPool(pool)
	testwait.For(t, 60*time.Second, "3 machines running", func() (bool, string) {
		ms := f.machines()
		n := 0
		for _, m := range ms {
			if m.Status.Phase == api.MachineRunning {
				n++
			}
		}
		return n == 3 && len(running()) == 3, fmt.Sprintf("running domains %v", running())
	})
	if a, b := len(hosts[0].domains(t)), len(hosts[1].domains(t)); a == 0 || b == 0 {
		t.Fatalf("spread pool on one host: %d and %d", a, b)
	}

	// The machines' agents boot and join as workers.
	workers := map[string]*node{}
	for i := 0; i < 3; i++ {
		name := placement.MachineName("web", i)
		cfg := f.AgentConfig(name, false)
		cfg.Roles = []api.Role{api.RoleWorker}
		workers[name] = f.Start(cfg)
	}
	testwait.For(t, 60*time.Second, "machines discoverable", func() (bool, string) {
		for name, m := range f.machines() {
			if !m.Status.Discoverable {
				return false, name + " not discoverable"
			}
		}
		return true, ""
	})

	// Room for 8 machines of 1 GiB in 8 GiB: the ninth stays Pending.
	pool.Spec.Count = 9
	f.putPool(pool)
	waitObj[api.Machine](f, 60*time.Second, store.MachineKey("web-8"), "web-8 pending with a reason", func(m *api.Machine) bool {
		c := api.FindCondition(m.Status.Conditions, api.CondScheduled)
		return m.Status.Phase == api.MachinePending && c != nil && !c.Status && strings.Contains(c.Message, "memory 0 MiB free < 1024 MiB")
	})
	testwait.For(t, 60*time.Second, "8 domains running", func() (bool, string) { return len(running()) == 8, fmt.Sprint(running()) })

	// Scale down to 2: web-2's node leaves through the safe removal first.
	pool.Spec.Count = 2
	f.putPool(pool)
	select {
	case err := <-workers["web-2"].Done:
		workers["web-2"].Done <- err
		if !errors.Is(err, agent.ErrRemoved) {
			t.Fatalf("web-2's agent returned %v, want ErrRemoved", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("web-2's node was not removed")
	}
	testwait.For(t, 60*time.Second, "pool scaled down to 2", func() (bool, string) {
		ms := f.machines()
		return len(ms) == 2 && ms["web-0"] != nil && ms["web-1"] != nil && slices.Equal(running(), []string{"web-0", "web-1"}),
			fmt.Sprintf("%d machines, running %v", len(ms), running())
	})
	r := &api.RemoveRequest{}
	if err := f.Store().Get(t.Context(), store.RemovalKey("web-2"), r); err != nil || r.Status.Phase != api.RemoveDone {
		t.Fatalf("removal of web-2: %+v %v", r.Status, err)
	}
	waitObj[api.MachinePool](f, 30*time.Second, store.PoolKey("web"), "pool ready", func(p *api.MachinePool) bool {
		c := api.FindCondition(p.Status.Conditions, api.CondReady)
		return c != nil && c.Status && p.Status.Running == 2
	})

	// Bad input: nothing is created, each pool says why.
	for _, c := range []struct {
		name string
		mod  func(*api.MachinePoolSpec)
		want string
	}{
		{"bad-net", func(s *api.MachinePoolSpec) { s.Template.Network = "nope" }, `no network "nope"`},
		{"bad-image", func(s *api.MachinePoolSpec) { s.Template.BaseImage = "nope.qcow2" }, `no base image "default/nope.qcow2"`},
		{"bad-mem", func(s *api.MachinePoolSpec) { s.Template.MemoryMiB = 1 << 20 }, "memory 4096 MiB in all < 1048576 MiB"},
		{"bad-count", func(s *api.MachinePoolSpec) { s.Count = -1 }, "count -1: want 0 or more"},
	} {
		bad := api.NewMachinePool(c.name)
		bad.Spec = pool.Spec
		c.mod(&bad.Spec)
		f.putPool(bad)
		waitObj[api.MachinePool](f, 30*time.Second, store.PoolKey(c.name), c.name+" invalid", func(p *api.MachinePool) bool {
			c2 := api.FindCondition(p.Status.Conditions, api.CondValid)
			return c2 != nil && !c2.Status && strings.Contains(c2.Message, c.want)
		})
	}
	for name := range f.machines() {
		if strings.HasPrefix(name, "bad-") {
			t.Fatalf("machine %s created for an invalid pool", name)
		}
	}
	for _, h := range hosts {
		ds, err := h.hv.Domains(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if strings.HasPrefix(d.Spec.Name, "bad-") {
				t.Fatalf("domain %s (%s) created on %s for an invalid pool", d.Spec.Name, d.State, h.name)
			}
		}
	}
}

package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
)

// TestClusterPlaneVMs: KubernetesCluster planes drawing VMs from a pool,
// on two libvirt test-driver hosts. Cluster prod's data plane asks for two
// VMs and cluster other's for one; the VMs boot (their agents register as
// workers) and each plane holds its own. A prod VM dies (its domain
// destroyed, its agent gone): after replaceDeadMembersAfter its plane lets
// it go, the claim drops it and asks for a fresh VM, whose domain is made
// and which the plane takes once it registers; the dead domain is removed.
// prod scaled down to one releases one VM and destroys its domain. prod
// deleted destroys the VMs it asked for and no others: other's VM runs on;
// the leader dies as the deletion is asked for and its successor carries
// it out.
func TestClusterPlaneVMs(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()} // its agents apply generations
	cfg := f.AgentConfig("cp-1", true)
	cfg.Applier = rf.applier("cp-1")
	f.Start(cfg)
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(1)
	f.setEtcdCluster(func(s *api.EtcdClusterSpec) {
		s.Policy.ReplaceDeadMembersAfter = api.Duration(api.MinReplaceDeadMembersAfter)
	})
	c1 := f.StartCoordinator("c-1")
	cfg2 := f.AgentConfig("cp-2", false) // a standby: other's control plane
	cfg2.Applier = rf.applier("cp-2")
	f.Start(cfg2)
	hosts := []*hvHost{
		f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 8192}),
		f.startHypervisor("hv-2", libvirttest.Options{VCPUs: 8, MemoryMiB: 8192}),
	}
	for _, h := range hosts {
		waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey(h.name), h.name+" reported", func(*api.Hypervisor) bool { return true })
	}
	f.vmPool()
	domains := func() []string { // defined, in any state
		var all []string
		for _, h := range hosts {
			ds, err := h.hv.Domains(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				all = append(all, d.Spec.Name)
			}
		}
		slices.Sort(all)
		return all
	}
	vms := map[string]*fleetkit.Node{}
	boot := func(name string) {
		t.Helper()
		waitObj[api.Machine](f, 30*time.Second, store.MachineKey(name), name+" running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		cfg := f.AgentConfig(name, false)
		cfg.Roles = []api.Role{api.RoleWorker}
		cfg.Applier = rf.applier(name)
		vms[name] = f.Start(cfg)
	}
	cluster := func(name, controlPlane string, count int) {
		t.Helper()
		kc := api.NewKubernetesCluster(name)
		if err := f.Store().Get(t.Context(), store.ClusterKey(name), kc); err != nil {
			kc = api.NewKubernetesCluster(name)
			kc.Spec.GitRepo, kc.Spec.Version = "https://git.example/fleet", "1.33"
			// No Kubernetes runs here: its components are not probed.
			kc.Spec.Probes = api.ClusterProbes{APIServer: &api.ComponentProbe{Disabled: true}, ControllerManager: &api.ComponentProbe{Disabled: true}, Scheduler: &api.ComponentProbe{Disabled: true}}
			kc.Spec.ControlPlane.MachineSet = api.MachineSet{Machines: []string{controlPlane}}
		}
		kc.Spec.DataPlane.MachineSet = api.MachineSet{MachinePool: "vms", Count: count}
		if err := f.Store().Put(t.Context(), store.ClusterKey(name), kc); err != nil {
			t.Fatal(err)
		}
	}
	plane := func(name string, want ...string) {
		t.Helper()
		slices.Sort(want)
		waitObj[api.KubernetesCluster](f, 60*time.Second, store.ClusterKey(name), fmt.Sprintf("%s's data plane %v", name, want), func(kc *api.KubernetesCluster) bool {
			return slices.Equal(kc.Status.DataPlane.Machines, want)
		})
	}
	wantDomains := func(what string, want ...string) {
		t.Helper()
		slices.Sort(want)
		testwait.For(t, 60*time.Second, what, func() (bool, string) {
			got := domains()
			return slices.Equal(got, want), fmt.Sprint(got)
		})
	}

	cluster("prod", "cp-1", 2)
	cluster("other", "cp-2", 1)
	prod := []string{"vms-prod-dataplane-0", "vms-prod-dataplane-1"}
	other := "vms-other-dataplane-0"
	wantDomains("three domains", append([]string{other}, prod...)...)
	for _, name := range append([]string{other}, prod...) {
		boot(name)
	}
	plane("prod", prod...)
	plane("other", other)
	for name, cp := range map[string]string{"prod": "cp-1", "other": "cp-2"} {
		waitObj[api.KubernetesCluster](f, 60*time.Second, store.ClusterKey(name), name+"'s control plane "+cp, func(kc *api.KubernetesCluster) bool {
			return slices.Equal(kc.Status.ControlPlane.Machines, []string{cp})
		})
	}

	// prod-dataplane-0 dies with its VM.
	dead := prod[0]
	f.destroyDomain(hosts, dead)
	vms[dead].Cancel()
	fresh := "vms-prod-dataplane-2"
	wantDomains("the dead VM's domain gone and a fresh one made", other, prod[1], fresh)
	boot(fresh)
	plane("prod", prod[1], fresh)
	if c := waitObj[api.MachineClaim](f, 30*time.Second, store.MachineClaimKey(api.KubernetesPlaneClaimName("prod", "dataplane")), "prod's claim without the dead VM", func(c *api.MachineClaim) bool {
		return slices.Equal(c.Spec.Machines, []string{prod[1], fresh})
	}); c.Spec.NextOrdinal != 3 {
		t.Fatalf("prod's claim: %+v", c.Spec)
	}

	// Scaled down to one: one VM released, its domain destroyed.
	cluster("prod", "cp-1", 1)
	testwait.For(t, 60*time.Second, "prod down to one VM", func() (bool, string) {
		got := domains()
		return len(got) == 2 && slices.Contains(got, other), fmt.Sprint(got)
	})
	kept := slices.DeleteFunc(domains(), func(d string) bool { return d == other })
	plane("prod", kept...)

	// Deleted: prod's VMs go, other's stays; the leader dies as the
	// deletion is asked for, and its successor carries it out.
	kc := api.NewKubernetesCluster("prod")
	if err := f.Store().Get(t.Context(), store.ClusterKey("prod"), kc); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	kc.Metadata.DeletionTimestamp = &now
	if err := f.Store().Put(t.Context(), store.ClusterKey("prod"), kc); err != nil {
		t.Fatal(err)
	}
	c1.Crash()
	f.StartCoordinator("c-2")
	wantDomains("prod's VMs destroyed, other's running", other)
	testwait.For(t, 60*time.Second, "prod and its claims gone", func() (bool, string) {
		_, err1 := f.Store().GetKV(t.Context(), store.ClusterKey("prod"))
		_, err2 := f.Store().GetKV(t.Context(), store.MachineClaimKey(api.KubernetesPlaneClaimName("prod", "dataplane")))
		return err1 != nil && err2 != nil, fmt.Sprint(err1, err2)
	})
	plane("other", other)
}

// TestClusterControlPlaneVMReplaced: a KubernetesCluster's control plane
// draws a VM from a pool; the VM's agent joins etcd as the third voter.
// The VM dies: no roll is started onto it, and a roll in flight on it
// halts once it is dead past replaceDeadMembersAfter (it would hold the
// one-change slot its member's removal needs); its member is removed first
// (the plane keeps a VM that runs an etcd member until then), then the
// plane lets it go, its domain is removed and a fresh VM is asked for,
// which joins as a voter and which the plane takes.
func TestClusterControlPlaneVMReplaced(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()} // its agents apply generations
	m1 := f.startMesh("cp-1", 131)
	seed := m1.Addr()
	cfg := f.AgentConfig("cp-1", true)
	cfg.Gossip = m1
	cfg.Applier = rf.applier("cp-1")
	f.Start(cfg)
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(3)
	f.setEtcdCluster(func(s *api.EtcdClusterSpec) {
		s.Policy.ReplaceDeadMembersAfter = api.Duration(api.MinReplaceDeadMembersAfter)
	})
	f.Gossip = f.startMesh("coord-1", 130, seed)
	f.StartCoordinator("coord-1")
	meshes := map[string]*gossip.Mesh{}
	agents := map[string]*node{}
	start := func(name string, ip int) {
		meshes[name] = f.startMesh(name, ip, seed)
		c := f.AgentConfig(name, false)
		c.Gossip = meshes[name]
		c.Applier = rf.applier(name)
		agents[name] = f.Start(c)
	}
	start("cp-2", 132)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	h := f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 8192})
	waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey("hv-1"), "hv-1 reported", func(*api.Hypervisor) bool { return true })
	f.vmPool()

	kc := api.NewKubernetesCluster("prod")
	kc.Spec.GitRepo, kc.Spec.Version = "https://git.example/fleet", "1.33"
	// No Kubernetes runs here: its components are not probed.
	kc.Spec.Probes = api.ClusterProbes{APIServer: &api.ComponentProbe{Disabled: true}, ControllerManager: &api.ComponentProbe{Disabled: true}, Scheduler: &api.ComponentProbe{Disabled: true}}
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{MachinePool: "vms", Count: 1}
	if err := f.Store().Put(t.Context(), store.ClusterKey("prod"), kc); err != nil {
		t.Fatal(err)
	}
	first, fresh := "vms-prod-controlplane-0", "vms-prod-controlplane-1"
	boot := func(name string, ip int) {
		t.Helper()
		waitObj[api.Machine](f, 90*time.Second, store.MachineKey(name), name+" running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		start(name, ip)
	}
	boot(first, 133)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", first)
	ready := waitObj[api.KubernetesCluster](f, 60*time.Second, store.ClusterKey("prod"), "prod's control plane "+first+" ready", func(kc *api.KubernetesCluster) bool {
		return slices.Equal(kc.Status.ControlPlane.ReadyMachines, []string{first}) && kc.Status.Phase == api.ClusterReady
	})
	// Its last roll (the endpoint it brought) finished: no rollout step
	// waits on the VM when it dies.
	waitObj[api.Rollout](f, 60*time.Second, store.RolloutKey(ready.Status.Rollout), "rollout "+ready.Status.Rollout+" finished", func(r *api.Rollout) bool {
		return r.Status.Phase == api.RolloutSucceeded
	})

	// The VM dies: its domain off, its mesh member and agent gone without a word.
	f.destroyDomain([]*hvHost{h}, first)
	_ = meshes[first].Shutdown()
	if err := agents[first].Stop(); err != nil {
		t.Fatal(err)
	}
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	boot(fresh, 134)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", fresh)
	waitObj[api.KubernetesCluster](f, 60*time.Second, store.ClusterKey("prod"), "prod's control plane "+fresh, func(kc *api.KubernetesCluster) bool {
		return slices.Equal(kc.Status.ControlPlane.Machines, []string{fresh})
	})
	testwait.For(t, 60*time.Second, "the dead VM's domain removed", func() (bool, string) {
		ds, err := h.hv.Domains(t.Context())
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, d := range ds {
			names = append(names, d.Spec.Name)
		}
		return slices.Equal(names, []string{fresh}), fmt.Sprint(names)
	})
	// Its member was removed through a removal request, as any dead voter's.
	r := api.NewRemoveRequest(first)
	if err := f.Store().Get(t.Context(), store.RemovalKey(first), r); err != nil || r.Status.Phase != api.RemoveDone {
		t.Fatalf("%s's removal: %q (%v), want Done", first, r.Status.Phase, err)
	}
}

// destroyDomain powers domain name off at once on whichever host has it,
// as a VM that died.
func (f *fleet) destroyDomain(hosts []*hvHost, name string) {
	f.t.Helper()
	for _, h := range hosts {
		ds, err := h.hv.Domains(f.t.Context())
		if err != nil {
			f.t.Fatal(err)
		}
		for _, d := range ds {
			if d.Spec.Name == name {
				if err := h.hv.Stop(f.t.Context(), d.Spec.UUID, 0); err != nil {
					f.t.Fatal(err)
				}
				return
			}
		}
	}
	f.t.Fatalf("no host has %s", name)
}

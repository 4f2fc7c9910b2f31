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
)

// setEtcdCluster changes the stored EtcdCluster's spec with mod.
func (f *fleet) setEtcdCluster(mod func(*api.EtcdClusterSpec)) {
	f.t.Helper()
	ec := api.NewEtcdCluster()
	if err := f.Store().Get(f.t.Context(), store.EtcdClusterKey, ec); err != nil {
		f.t.Fatal(err)
	}
	mod(&ec.Spec)
	if err := f.Store().Put(f.t.Context(), store.EtcdClusterKey, ec); err != nil {
		f.t.Fatal(err)
	}
}

// TestEtcdClusterGrowsWithVMs: an EtcdCluster of one bare-metal voter
// with spec.voters 3 and a machine pool gets two VMs from the pool, one on
// each of two hypervisor hosts (losing either keeps quorum); the VMs'
// agents self-join and become voters. The coordinator leader is killed
// between the claim and the VMs' joins, and its successor carries on.
// Lowering spec.voters to 1 sheds the VM voters first and then destroys
// their domains, and the claim ends with none.
func TestEtcdClusterGrowsWithVMs(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(1)
	c1 := f.StartCoordinator("c-1")
	hosts := []*hvHost{
		f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
		f.startHypervisor("hv-2", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
	}
	for _, h := range hosts {
		waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey(h.name), h.name+" reported", func(*api.Hypervisor) bool { return true })
	}
	f.vmPool()

	f.setEtcdCluster(func(s *api.EtcdClusterSpec) { s.Voters, s.MachinePool = 3, "vms" })
	vms := []string{"vms-etcd-0", "vms-etcd-1"}
	claim := waitObj[api.MachineClaim](f, 30*time.Second, store.MachineClaimKey(api.EtcdClaimName), "the claim placed over both hosts", func(c *api.MachineClaim) bool {
		if !slices.Equal(c.Spec.Machines, vms) || !slices.Equal(c.Spec.SpreadWith, []string{"cp-1"}) || len(c.Status.Machines) != 2 {
			return false
		}
		s := api.FindCondition(c.Status.Conditions, api.CondSpread)
		return c.Status.Machines[0].Host != "" && c.Status.Machines[1].Host != "" && s != nil && s.Status
	})
	if a, b := claim.Status.Machines[0].Host, claim.Status.Machines[1].Host; a == b {
		t.Fatalf("both VMs on %s", a)
	}
	for _, name := range vms {
		if m := f.machines()[name]; m == nil || m.Spec.Claim != api.EtcdClaimName || !slices.Equal(m.Spec.Template.Roles, []api.Role{api.RoleControlPlane}) {
			t.Fatalf("machine %s: %+v", name, m)
		}
	}

	// The leader dies between steps: its successor resumes from etcd.
	c1.Crash()
	f.StartCoordinator("c-2")
	testwait.For(t, 60*time.Second, "2 domains running", func() (bool, string) {
		var all []string
		for _, h := range hosts {
			all = append(all, h.domains(t)...)
		}
		slices.Sort(all)
		return slices.Equal(all, vms), fmt.Sprint(all)
	})
	// The VMs boot: their agents self-join as control-plane hosts do.
	for _, name := range vms {
		f.Start(f.AgentConfig(name, false))
	}
	f.WaitVoters(90*time.Second, append([]string{"cp-1"}, vms...)...)
	if c := f.claimOf(); len(c.Spec.Machines) != 2 || c.Spec.NextOrdinal != 2 {
		t.Fatalf("claim after the joins: %+v", c.Spec)
	}

	// Scale down: the VM voters are shed first (the etcd leader last),
	// then their domains are destroyed; cp-1 stays the one voter.
	f.setEtcdCluster(func(s *api.EtcdClusterSpec) { s.Voters = 1 })
	f.WaitVoters(90*time.Second, "cp-1")
	testwait.For(t, 90*time.Second, "the VMs destroyed", func() (bool, string) {
		var all []string
		for _, h := range hosts {
			all = append(all, h.domains(t)...)
		}
		c := f.claimOf()
		return len(all) == 0 && len(f.machines()) == 0 && len(c.Spec.Machines) == 0, fmt.Sprintf("domains %v, claim %+v", all, c.Spec)
	})
}

// TestDeadVMVoterIsReplaced: a VM voter whose node dies is removed after
// policy.replaceDeadMembersAfter (membership's plain removal); then the
// claim releases it, its domain is destroyed, and a fresh VM is asked for,
// placed on the host the dead one left, and joins as a voter.
func TestDeadVMVoterIsReplaced(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	m1 := f.startMesh("cp-1", 121)
	seed := m1.Addr()
	cfg := f.AgentConfig("cp-1", true)
	cfg.Gossip = m1
	f.Start(cfg)
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(1)
	f.Gossip = f.startMesh("coord-1", 120, seed)
	f.StartCoordinator("coord-1")
	hosts := []*hvHost{
		f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
		f.startHypervisor("hv-2", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096}),
	}
	for _, h := range hosts {
		waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey(h.name), h.name+" reported", func(*api.Hypervisor) bool { return true })
	}
	f.vmPool()
	f.setEtcdCluster(func(s *api.EtcdClusterSpec) {
		s.Voters, s.MachinePool = 3, "vms"
		s.Policy.ReplaceDeadMembersAfter = api.Duration(api.MinReplaceDeadMembersAfter)
	})
	meshes := map[string]*gossip.Mesh{}
	agents := map[string]*node{}
	boot := func(name string, ip int) {
		waitObj[api.Machine](f, 30*time.Second, store.MachineKey(name), name+" running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		meshes[name] = f.startMesh(name, ip, seed)
		c := f.AgentConfig(name, false)
		c.Gossip = meshes[name]
		agents[name] = f.Start(c)
	}
	boot("vms-etcd-0", 122)
	boot("vms-etcd-1", 123)
	f.WaitVoters(90*time.Second, "cp-1", "vms-etcd-0", "vms-etcd-1")
	deadHost := f.machines()["vms-etcd-1"].Spec.Host

	// vms-etcd-1 dies: its mesh member and agent stop without a word.
	_ = meshes["vms-etcd-1"].Shutdown()
	if err := agents["vms-etcd-1"].Stop(); err != nil {
		t.Fatal(err)
	}
	waitObj[api.MachineClaim](f, 90*time.Second, store.MachineClaimKey(api.EtcdClaimName), "vms-etcd-1 replaced by vms-etcd-2", func(c *api.MachineClaim) bool {
		return slices.Equal(c.Spec.Machines, []string{"vms-etcd-0", "vms-etcd-2"})
	})
	f.WaitVoters(30*time.Second, "cp-1", "vms-etcd-0")
	boot("vms-etcd-2", 124)
	f.WaitVoters(90*time.Second, "cp-1", "vms-etcd-0", "vms-etcd-2")
	testwait.For(t, 60*time.Second, "vms-etcd-1's domain destroyed, vms-etcd-2 on "+deadHost, func() (bool, string) {
		ms := f.machines()
		var all []string
		for _, h := range hosts {
			all = append(all, h.domains(t)...)
		}
		slices.Sort(all)
		return ms["vms-etcd-1"] == nil && ms["vms-etcd-2"] != nil && ms["vms-etcd-2"].Spec.Host == deadHost &&
			slices.Equal(all, []string{"vms-etcd-0", "vms-etcd-2"}), fmt.Sprintf("domains %v", all)
	})
}

func (f *fleet) claimOf() *api.MachineClaim {
	f.t.Helper()
	c := api.NewMachineClaim(api.EtcdClaimName)
	if err := f.Store().Get(f.t.Context(), store.MachineClaimKey(api.EtcdClaimName), c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

package integration

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// vmPool stores the pool "vms" the etcd-machines tests draw from.
func (f *fleet) vmPool() {
	f.t.Helper()
	pool := api.NewMachinePool("vms")
	pool.Spec = api.MachinePoolSpec{Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 1024, DiskGiB: 4, BaseImage: "base.qcow2", Network: "default"}}
	f.putPool(pool)
}

// bootVM starts name's agent once its Machine runs, as the VM's first
// boot does.
func (f *fleet) bootVM(name string) {
	f.t.Helper()
	waitObj[api.Machine](f, 30*time.Second, store.MachineKey(name), name+" running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
	f.Start(f.AgentConfig(name, false))
}

// TestEtcdGrowSurvivesLeaderDeath: the coordinator leader is killed (its
// client closed from inside the step, so it writes nothing more) right
// after each step of a grow by one VM: the claim written, the VM's Machine
// created, the VM registered (before its learner is added), the learner
// added, the learner promoted. Its successor resumes from etcd: the grow
// ends with the VM a voter, one Machine and one domain, none asked twice.
// The VM is the one host joining, so every learner step is its own.
func TestEtcdGrowSurvivesLeaderDeath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		step string
		hook func(kill func()) func(*coord)
	}{
		{"claim written", func(kill func()) func(*coord) {
			return func(c *coord) {
				c.Observer.OnMachineWrite = func(s string) {
					if s == "claim" {
						kill()
					}
				}
			}
		}},
		{"VM created", func(kill func()) func(*coord) {
			return func(c *coord) {
				c.Observer.OnMachineWrite = func(s string) {
					if s == "machines" {
						kill()
					}
				}
			}
		}},
		{"VM registered", func(kill func()) func(*coord) {
			return func(c *coord) {
				next := c.Observer.OnMembershipStep
				c.Observer.OnMembershipStep = func(s membership.Step) {
					if s.Action == membership.AddLearner {
						kill()
					}
					next(s)
				}
			}
		}},
		{"learner added", func(kill func()) func(*coord) {
			return func(c *coord) {
				c.Observer.OnMembershipChanged = func(s membership.Step) {
					if s.Action == membership.AddLearner {
						kill()
					}
				}
			}
		}},
		{"promoted", func(kill func()) func(*coord) {
			return func(c *coord) {
				c.Observer.OnMembershipChanged = func(s membership.Step) {
					if s.Action == membership.Promote {
						kill()
					}
				}
			}
		}},
	} {
		t.Run(tt.step, func(t *testing.T) {
			f := newFleet(t)
			f.Start(f.AgentConfig("cp-1", true))
			f.WaitVoters(30*time.Second, "cp-1")
			f.SetVoters(1)
			var once sync.Once
			killed := make(chan struct{})
			var c1 *coord
			c1 = f.StartCoordinator("c-1", tt.hook(func() { once.Do(func() { c1.Cut(); close(killed) }) }))
			testwait.For(t, 20*time.Second, "c-1 leads", func() (bool, string) { n := f.LeaderName(); return n == "c-1", n })
			hv := f.startHypervisor("hv-1", libvirttest.Options{VCPUs: 8, MemoryMiB: 4096})
			waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey("hv-1"), "hv-1 reported", func(*api.Hypervisor) bool { return true })
			f.vmPool()
			f.setEtcdCluster(func(s *api.EtcdClusterSpec) { s.Voters, s.MachinePool = 2, "vms" })

			booted := false
			boot := func() {
				if !booted {
					booted = true
					f.bootVM("vms-etcd-0")
				}
			}
			if tt.step != "claim written" && tt.step != "VM created" {
				boot() // the later steps need the VM's agent before the kill
			}
			select {
			case <-killed:
			case <-time.After(60 * time.Second):
				t.Fatalf("c-1 never reached the step %q", tt.step)
			}
			go c1.Stop()
			f.StartCoordinator("c-2")
			testwait.For(t, 30*time.Second, "c-2 takes over", func() (bool, string) { n := f.LeaderName(); return n == "c-2", n })
			boot()
			f.WaitVoters(60*time.Second, "cp-1", "vms-etcd-0")
			testwait.For(t, 30*time.Second, "one VM asked for, one domain", func() (bool, string) {
				c, ms, ds := f.claimOf(), f.machines(), hv.domains(t)
				return slices.Equal(c.Spec.Machines, []string{"vms-etcd-0"}) && c.Spec.NextOrdinal == 1 && len(ms) == 1 && slices.Equal(ds, []string{"vms-etcd-0"}),
					fmt.Sprintf("claim %+v, machines %d, domains %v", c.Spec, len(ms), ds)
			})
		})
	}
}

// TestEtcdGrowsToFiveOverThreeHosts: one bare-metal voter with
// spec.voters 5 gets four VMs spread over three hypervisor hosts, no host
// holding more than two of the five voters (losing any one host keeps
// quorum), the claim's Spread condition true; the VMs become voters.
func TestEtcdGrowsToFiveOverThreeHosts(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(1)
	f.StartCoordinator("c-1")
	hosts := map[string]*hvHost{}
	for _, name := range []string{"hv-1", "hv-2", "hv-3"} {
		hosts[name] = f.startHypervisor(name, libvirttest.Options{VCPUs: 8, MemoryMiB: 4096})
		waitObj[api.Hypervisor](f, 30*time.Second, store.HypervisorKey(name), name+" reported", func(*api.Hypervisor) bool { return true })
	}
	f.vmPool()
	f.setEtcdCluster(func(s *api.EtcdClusterSpec) { s.Voters, s.MachinePool = 5, "vms" })
	vms := []string{"vms-etcd-0", "vms-etcd-1", "vms-etcd-2", "vms-etcd-3"}
	claim := waitObj[api.MachineClaim](f, 30*time.Second, store.MachineClaimKey(api.EtcdClaimName), "four VMs placed", func(c *api.MachineClaim) bool {
		if !slices.Equal(c.Spec.Machines, vms) || len(c.Status.Machines) != len(vms) {
			return false
		}
		for _, m := range c.Status.Machines {
			if m.Host == "" {
				return false
			}
		}
		s := api.FindCondition(c.Status.Conditions, api.CondSpread)
		return s != nil && s.Status
	})
	per := map[string]int{}
	for _, m := range claim.Status.Machines {
		per[m.Host]++
	}
	if len(per) != 3 {
		t.Fatalf("VMs on %d hosts, want 3: %v", len(per), per)
	}
	for h, n := range per {
		if n > 2 {
			t.Fatalf("%d of 5 voters on %s: losing it loses quorum (%v)", n, h, per)
		}
	}
	for _, name := range vms {
		f.bootVM(name)
	}
	f.WaitVoters(90*time.Second, append([]string{"cp-1"}, vms...)...)
	ms := f.machines()
	for name, h := range hosts {
		var want []string
		for _, vm := range vms {
			if ms[vm].Spec.Host == name {
				want = append(want, vm)
			}
		}
		got := h.domains(t)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s runs %v, want %v", name, got, want)
		}
	}
}

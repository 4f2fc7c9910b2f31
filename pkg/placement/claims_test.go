package placement

import (
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

func claimOf(name, pool string, machines []string, spreadWith ...string) *api.MachineClaim {
	c := api.NewMachineClaim(name)
	c.Spec = api.MachineClaimSpec{Pool: pool, Machines: machines, SpreadWith: spreadWith, Quorum: true, Roles: []api.Role{api.RoleControlPlane}}
	return c
}

func claimed(claim, name, host string) *api.Machine {
	m := machine("vms", 0, host)
	m.Metadata.Name = name
	m.Spec.Claim = claim
	m.Spec.Template.Roles = []api.Role{api.RoleControlPlane}
	return m
}

func labelled(h *Host, topology string) *Host {
	h.Labels = map[string]string{api.LabelTopology: topology}
	return h
}

func claimCond(t *testing.T, pl Plan, typ string) *api.Condition {
	t.Helper()
	if len(pl.Claims) == 0 {
		t.Fatalf("no claim status in plan %s", pl.Counts())
	}
	return api.FindCondition(pl.Claims[0].Status.Conditions, typ)
}

func TestClaims(t *testing.T) {
	vms := pool("vms", 0)
	two := []string{"vms-etcd-0", "vms-etcd-1"}
	cases := []struct {
		name  string
		in    Input
		check func(t *testing.T, pl Plan)
	}{
		{"grow beside a bare-metal voter: one VM on each hypervisor host", Input{Pools: []*api.MachinePool{vms},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", two, "cp-1")}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); !slices.Equal(got["hv-1"], []string{"vms-etcd-0"}) || !slices.Equal(got["hv-2"], []string{"vms-etcd-1"}) {
					t.Fatalf("placement %v", got)
				}
				for _, m := range pl.Create {
					if m.Spec.Claim != "etcd" || !slices.Equal(m.Spec.Template.Roles, []api.Role{api.RoleControlPlane}) {
						t.Fatalf("machine %+v", m.Spec)
					}
				}
				if c := claimCond(t, pl, api.CondSpread); c == nil || !c.Status || !strings.Contains(c.Message, "3 voters over 3 failure domains") {
					t.Fatalf("Spread %+v", c)
				}
				if st := pl.Pools[0].Status; st.Claimed != 2 || st.Machines != 0 {
					t.Fatalf("pool status %+v", st)
				}
			}},
		{"the voter on a hypervisor host counts in its domain: two hosts cannot keep quorum", Input{Pools: []*api.MachinePool{vms},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", two, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); !slices.Equal(got["hv-2"], []string{"vms-etcd-0"}) {
					t.Fatalf("placement %v: the first VM belongs away from hv-1", got)
				}
				c := claimCond(t, pl, api.CondSpread)
				if c == nil || c.Status || c.Reason != "QuorumAtRisk" || !strings.Contains(c.Message, "would lose 2 of 3 voters (quorum 2)") {
					t.Fatalf("Spread %+v", c)
				}
			}},
		{"the voter on a hypervisor host, three hosts: one voter each", Input{Pools: []*api.MachinePool{vms},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", two, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192), host("hv-3", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); len(got["hv-1"]) != 0 || len(got["hv-2"]) != 1 || len(got["hv-3"]) != 1 {
					t.Fatalf("placement %v", got)
				}
				if c := claimCond(t, pl, api.CondSpread); c == nil || !c.Status {
					t.Fatalf("Spread %+v", c)
				}
			}},
		{"five voters over three hosts", Input{Pools: []*api.MachinePool{vms},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0", "vms-etcd-1", "vms-etcd-2", "vms-etcd-3"}, "cp-1")},
			Hosts:  []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192), host("hv-3", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				got := placed(pl)
				for _, h := range []string{"hv-1", "hv-2", "hv-3"} {
					if n := len(got[h]); n < 1 || n > 2 {
						t.Fatalf("placement %v", got)
					}
				}
				if c := claimCond(t, pl, api.CondSpread); c == nil || !c.Status || !strings.Contains(c.Message, "at most 2 in one") {
					t.Fatalf("Spread %+v", c)
				}
			}},
		{"topology labels: two hosts in one rack count as one domain", Input{Pools: []*api.MachinePool{vms},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", two, "cp-1")},
			Nodes: map[string]*api.Node{"cp-1": func() *api.Node {
				n := node("cp-1", api.NodeRegistered)
				n.Spec.Labels = map[string]string{api.LabelTopology: "rack-c"}
				return n
			}()},
			Hosts: []*Host{labelled(host("hv-1", 8, 8192), "rack-a"), labelled(host("hv-2", 8, 8192), "rack-a"), labelled(host("hv-3", 8, 4096), "rack-b")}},
			func(t *testing.T, pl Plan) {
				got := placed(pl)
				if len(got["hv-3"]) != 1 || len(got["hv-1"])+len(got["hv-2"]) != 1 {
					t.Fatalf("placement %v", got)
				}
				if st := pl.Claims[0].Status.Machines; len(st) != 2 || st[0].Domain == st[1].Domain {
					t.Fatalf("claim machines %+v", st)
				}
			}},
		{"a fresh VM avoids the domains of the claim's placed VMs", Input{Pools: []*api.MachinePool{vms},
			Claims:   []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0", "vms-etcd-2"}, "cp-1")},
			Machines: []*api.Machine{claimed("etcd", "vms-etcd-0", "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 2048)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); !slices.Equal(got["hv-2"], []string{"vms-etcd-2"}) {
					t.Fatalf("placement %v", got)
				}
			}},
		{"a machine its claim dropped is taken away, node first; no other", Input{Pools: []*api.MachinePool{pool("vms", 1)},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0"}), claimOf("prod-controlplane", "vms", []string{"vms-prod-controlplane-0"})},
			Machines: []*api.Machine{machine("vms", 0, "hv-1"), claimed("etcd", "vms-etcd-0", "hv-1"), claimed("etcd", "vms-etcd-1", "hv-1"),
				claimed("prod-controlplane", "vms-prod-controlplane-0", "hv-1")},
			Nodes: map[string]*api.Node{"vms-etcd-1": node("vms-etcd-1", api.NodeRegistered), "vms-etcd-0": node("vms-etcd-0", api.NodeRegistered)},
			Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if !slices.Equal(pl.RequestRemoval, []string{"vms-etcd-1"}) || len(pl.Update)+len(pl.Delete)+len(pl.Create) != 0 {
					t.Fatalf("plan %s %v", pl.Counts(), pl.RequestRemoval)
				}
			}},
		{"a deleted claim's machines go, and no others", Input{Pools: []*api.MachinePool{pool("vms", 1)},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0"})},
			Machines: []*api.Machine{machine("vms", 0, "hv-1"), claimed("etcd", "vms-etcd-0", "hv-1"),
				claimed("prod-controlplane", "vms-prod-controlplane-0", "hv-1"), claimed("prod-dataplane", "vms-prod-dataplane-0", "hv-1")},
			Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				var deleting []string
				for _, m := range pl.Update {
					if m.Spec.Deleting {
						deleting = append(deleting, m.Metadata.Name)
					}
				}
				if !slices.Equal(deleting, []string{"vms-prod-controlplane-0", "vms-prod-dataplane-0"}) || len(pl.Create)+len(pl.Delete) != 0 {
					t.Fatalf("deleting %v (%s)", deleting, pl.Counts())
				}
			}},
		{"a claim on a pool that does not exist says so", Input{Claims: []*api.MachineClaim{claimOf("etcd", "nope", two)}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				c := claimCond(t, pl, api.CondScheduled)
				if c == nil || c.Status || !strings.Contains(c.Message, `no MachinePool named "nope"`) || len(pl.Create) != 0 {
					t.Fatalf("Scheduled %+v (%s)", c, pl.Counts())
				}
			}},
		{"an invalid pool creates nothing for its claims", Input{Pools: []*api.MachinePool{pool("vms", 0, func(p *api.MachinePool) { p.Spec.Template.Network = "nope" })},
			Claims: []*api.MachineClaim{claimOf("etcd", "vms", two)}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if c := claimCond(t, pl, api.CondScheduled); c == nil || c.Status || !strings.Contains(c.Message, "not valid") || len(pl.Create) != 0 {
					t.Fatalf("Scheduled %+v (%s)", c, pl.Counts())
				}
			}},
		{"no room: Pending, and the claim says so", Input{Pools: []*api.MachinePool{vms}, Claims: []*api.MachineClaim{claimOf("etcd", "vms", two)}, Hosts: []*Host{host("hv-1", 1, 8192)}},
			func(t *testing.T, pl Plan) {
				c := claimCond(t, pl, api.CondScheduled)
				if c == nil || c.Status || c.Message != "no host has room for vms-etcd-1 (see each machine's Scheduled condition)" {
					t.Fatalf("Scheduled %+v", c)
				}
			}},
		{"the pool's own machines and the claim's are counted apart", Input{Pools: []*api.MachinePool{pool("vms", 1)}, Claims: []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0"})},
			Machines: []*api.Machine{machine("vms", 0, "hv-1"), claimed("etcd", "vms-etcd-0", "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if len(pl.Create)+len(pl.Update)+len(pl.Delete)+len(pl.RequestRemoval) != 0 {
					t.Fatalf("plan %s", pl.Counts())
				}
				st := pl.Pools[0].Status
				if st.Machines != 2 || st.Claimed != 1 || st.Running != 2 || !api.FindCondition(st.Conditions, api.CondReady).Status {
					t.Fatalf("pool status %+v", st)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = now
			c.check(t, Compute(c.in))
		})
	}
}

// TestClaimsConverge feeds each plan back: a claim's machines are placed
// once and then nothing is written.
func TestClaimsConverge(t *testing.T) {
	in := Input{Now: now, Pools: []*api.MachinePool{pool("vms", 1)}, Claims: []*api.MachineClaim{claimOf("etcd", "vms", []string{"vms-etcd-0", "vms-etcd-1"}, "cp-1")},
		Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192)}}
	for pass := 0; ; pass++ {
		pl := Compute(in)
		if pl.Empty() {
			break
		}
		if pass == 5 {
			t.Fatalf("still writing after %d passes: %s", pass, pl.Counts())
		}
		ms := map[string]*api.Machine{}
		for _, m := range in.Machines {
			ms[m.Metadata.Name] = m
		}
		for _, m := range append(pl.Create, pl.Update...) {
			m.Status.Phase = api.MachineRunning
			ms[m.Metadata.Name] = m
		}
		in.Machines = slices.Collect(func(yield func(*api.Machine) bool) {
			for _, m := range ms {
				if !yield(m) {
					return
				}
			}
		})
		if len(pl.Pools) > 0 {
			in.Pools = pl.Pools
		}
		if len(pl.Claims) > 0 {
			in.Claims = pl.Claims
		}
	}
}

package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func host(name string, vcpus, memMiB int) *Host {
	return &Host{Name: name, Alive: true, Labels: map[string]string{"rack": name}, Report: api.HypervisorStatus{
		VCPUs: vcpus, MemoryMiB: memMiB, DiskGiB: map[string]int{"default": 100},
		Networks: []string{"default"}, Images: []string{"default/base.qcow2"},
	}}
}

func pool(name string, count int, mods ...func(*api.MachinePool)) *api.MachinePool {
	p := api.NewMachinePool(name)
	p.Spec = api.MachinePoolSpec{Count: count, Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 1024, DiskGiB: 10, BaseImage: "base.qcow2", Network: "default"}}
	for _, m := range mods {
		m(p)
	}
	return p
}

// placed returns the machines of a plan's creates, by host.
func placed(pl Plan) map[string][]string {
	out := map[string][]string{}
	for _, m := range pl.Create {
		out[m.Spec.Host] = append(out[m.Spec.Host], m.Metadata.Name)
	}
	return out
}

func machine(pool string, i int, host string, mods ...func(*api.Machine)) *api.Machine {
	m := api.NewMachine(MachineName(pool, i))
	m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: pool, Ordinal: i, Host: host, UUID: fmt.Sprintf("uuid-%d", i),
		Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 1024, DiskGiB: 10, BaseImage: "base.qcow2", Network: "default"}}
	m.Status.Phase = api.MachineRunning
	for _, f := range mods {
		f(m)
	}
	return m
}

func node(name string, phase api.NodePhase) *api.Node {
	n := api.NewNode(name)
	n.Metadata.CreatedAt = now.Add(-time.Hour)
	n.Status.Phase = phase
	return n
}

func removal(name string, phase api.RemovePhase) *api.RemoveRequest {
	r := api.NewRemoveRequest(name)
	r.Metadata.CreatedAt = now.Add(-time.Minute)
	r.Status.Phase = phase
	return r
}

func poolCond(t *testing.T, pl Plan, typ string) *api.Condition {
	t.Helper()
	if len(pl.Pools) == 0 {
		t.Fatalf("no pool status in plan %s", pl.Counts())
	}
	return api.FindCondition(pl.Pools[0].Status.Conditions, typ)
}

func TestCompute(t *testing.T) {
	cases := []struct {
		name  string
		in    Input
		check func(t *testing.T, pl Plan)
	}{
		{"pack onto the first host with room", Input{Pools: []*api.MachinePool{pool("web", 3)}, Hosts: []*Host{host("hv-2", 8, 8192), host("hv-1", 8, 2048)}},
			func(t *testing.T, pl Plan) {
				got := placed(pl)
				if !slices.Equal(got["hv-1"], []string{"web-0", "web-1"}) || !slices.Equal(got["hv-2"], []string{"web-2"}) {
					t.Fatalf("placement %v", got)
				}
			}},
		{"spread across hosts", Input{Pools: []*api.MachinePool{pool("web", 4, func(p *api.MachinePool) { p.Spec.Spread = true })}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192), host("hv-3", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				got := placed(pl)
				if len(got["hv-1"]) != 2 || len(got["hv-2"]) != 1 || len(got["hv-3"]) != 1 {
					t.Fatalf("placement %v", got)
				}
			}},
		{"spread counts machines already placed", Input{Pools: []*api.MachinePool{pool("web", 2, func(p *api.MachinePool) { p.Spec.Spread = true })}, Machines: []*api.Machine{machine("web", 0, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 4096)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); !slices.Equal(got["hv-2"], []string{"web-1"}) {
					t.Fatalf("placement %v", got)
				}
			}},
		{"capacity exhausted: Pending with what is missing", Input{Pools: []*api.MachinePool{pool("web", 3)}, Hosts: []*Host{host("hv-1", 2, 8192)}},
			func(t *testing.T, pl Plan) {
				if len(pl.Create) != 3 || pl.Create[2].Spec.Host != "" || pl.Create[2].Status.Phase != api.MachinePending {
					t.Fatalf("third machine %+v", pl.Create[2].Spec)
				}
				c := api.FindCondition(pl.Create[2].Status.Conditions, api.CondScheduled)
				if c == nil || c.Status || c.Reason != "InsufficientResources" || !strings.Contains(c.Message, "hv-1: 0 vCPUs free < 1") {
					t.Fatalf("condition %+v", c)
				}
			}},
		{"dead host gets nothing", Input{Pools: []*api.MachinePool{pool("web", 1)}, Hosts: []*Host{func() *Host { h := host("hv-1", 8, 8192); h.Alive = false; return h }()}},
			func(t *testing.T, pl Plan) {
				if pl.Create[0].Spec.Host != "" || !strings.Contains(api.FindCondition(pl.Create[0].Status.Conditions, api.CondScheduled).Message, "not alive") {
					t.Fatalf("%+v", pl.Create[0])
				}
			}},
		{"pending machine placed when room appears", Input{Pools: []*api.MachinePool{pool("web", 1)}, Machines: []*api.Machine{machine("web", 0, "", func(m *api.Machine) { m.Status.Phase = api.MachinePending })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if len(pl.Update) != 1 || pl.Update[0].Spec.Host != "hv-1" || len(pl.Create) != 0 {
					t.Fatalf("plan %s %+v", pl.Counts(), pl.Update)
				}
			}},
		{"host selector", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.HostSelector = map[string]string{"rack": "hv-2"} })}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if got := placed(pl); !slices.Equal(got["hv-2"], []string{"web-0"}) {
					t.Fatalf("placement %v", got)
				}
			}},
		{"steady state writes nothing", Input{Pools: []*api.MachinePool{func() *api.MachinePool {
			p := pool("web", 1)
			p.Status = api.MachinePoolStatus{Machines: 1, Running: 1, Conditions: []api.Condition{{Type: api.CondValid, Status: true}, {Type: api.CondReady, Status: true, Message: "1 of 1 machines running"}}}
			return p
		}()}, Machines: []*api.Machine{machine("web", 0, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if !pl.Empty() {
					t.Fatalf("plan %s: %+v", pl.Counts(), pl.Pools)
				}
			}},
		{"resize with room", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.MemoryMiB = 4096 })}, Machines: []*api.Machine{machine("web", 0, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 4096)}},
			func(t *testing.T, pl Plan) {
				if len(pl.Update) != 1 || pl.Update[0].Spec.Template.MemoryMiB != 4096 {
					t.Fatalf("plan %s", pl.Counts())
				}
			}},
		{"resize without room keeps the machine as it is", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.MemoryMiB = 4096 })}, Machines: []*api.Machine{machine("web", 0, "hv-1"), machine("db", 0, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 4096)}},
			func(t *testing.T, pl Plan) {
				var web *api.Machine
				for _, m := range pl.Update {
					if m.Spec.Pool == "web" {
						web = m
					}
				}
				if web == nil || web.Spec.Template.MemoryMiB != 1024 || api.FindCondition(web.Status.Conditions, api.CondScheduled).Reason != "ResizePending" {
					t.Fatalf("plan %s %+v", pl.Counts(), web)
				}
			}},
		{"a host's failure shows on the pool", Input{Pools: []*api.MachinePool{pool("web", 1)}, Machines: []*api.Machine{machine("web", 0, "hv-1", func(m *api.Machine) {
			m.Status.Phase = api.MachineFailed
			m.Status.Conditions = []api.Condition{{Type: api.CondProvisioned, Reason: "UnknownImage", Message: "hypervisor: no such base image"}}
		})}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				c := poolCond(t, pl, api.CondProvisioned)
				if c == nil || c.Status || c.Message != "web-0 on hv-1: hypervisor: no such base image" {
					t.Fatalf("condition %+v", c)
				}
			}},
		{"bad input: negative count", Input{Pools: []*api.MachinePool{pool("web", -1)}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) { wantInvalid(t, pl, "count -1: want 0 or more") }},
		{"bad input: unknown network", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.Network = "nope" })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) { wantInvalid(t, pl, `hv-1: no network "nope"`) }},
		{"bad input: unknown base image", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.BaseImage = "nope" })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) { wantInvalid(t, pl, `no base image "default/nope"`) }},
		{"bad input: memory larger than any host", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.MemoryMiB = 1 << 20 })}, Hosts: []*Host{host("hv-1", 8, 8192), host("hv-2", 8, 4096)}},
			func(t *testing.T, pl Plan) { wantInvalid(t, pl, "hv-2: memory 4096 MiB in all < 1048576 MiB") }},
		{"bad input: relative kernel path", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.Template.Boot = &api.KernelBoot{Kernel: "vmlinuz"} })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				wantInvalid(t, pl, `template.boot.kernel "vmlinuz": want an absolute path on the hypervisor host`)
			}},
		{"kernel boot: a new cmdline is a template change", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) {
			p.Spec.Template.Boot = &api.KernelBoot{Kernel: "/k", Cmdline: "console=ttyS0"}
		})}, Machines: []*api.Machine{machine("web", 0, "hv-1", func(m *api.Machine) { m.Spec.Template.Boot = &api.KernelBoot{Kernel: "/k"} })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				if len(pl.Update) != 1 || pl.Update[0].Spec.Template.Boot.Cmdline != "console=ttyS0" {
					t.Fatalf("plan %s", pl.Counts())
				}
			}},
		{"bad input: selector matches no host", Input{Pools: []*api.MachinePool{pool("web", 1, func(p *api.MachinePool) { p.Spec.HostSelector = map[string]string{"gpu": "yes"} })}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) { wantInvalid(t, pl, "no hypervisor host matches hostSelector") }},
		{"bad input: existing machines are kept", Input{Pools: []*api.MachinePool{pool("web", -3)}, Machines: []*api.Machine{machine("web", 0, "hv-1")}, Nodes: map[string]*api.Node{"web-0": node("web-0", api.NodeRegistered)}, Hosts: []*Host{host("hv-1", 8, 8192)}},
			func(t *testing.T, pl Plan) {
				wantInvalid(t, pl, "count -3")
				if len(pl.Update)+len(pl.Delete)+len(pl.RequestRemoval) != 0 {
					t.Fatalf("plan %s", pl.Counts())
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

func wantInvalid(t *testing.T, pl Plan, msg string) {
	t.Helper()
	c := poolCond(t, pl, api.CondValid)
	if c == nil || c.Status || !strings.Contains(c.Message, msg) {
		t.Fatalf("Valid condition %+v, want false with %q", c, msg)
	}
	if len(pl.Create) != 0 {
		t.Fatalf("created %d machines for an invalid pool", len(pl.Create))
	}
}

func TestScaleDown(t *testing.T) {
	hosts := []*Host{host("hv-1", 8, 8192)}
	m1 := machine("web", 1, "hv-1")
	cases := []struct {
		name     string
		machine  *api.Machine
		node     *api.Node
		removal  *api.RemoveRequest
		want     string // request, wait, deleting, delete
		waitText string
	}{
		{"registered node: its removal is requested", m1, node("web-1", api.NodeRegistered), nil, "request", "removal of its node requested"},
		{"removal running: wait", m1, node("web-1", api.NodeRegistered), removal("web-1", api.RemoveRunning), "wait", "waiting for its node to leave"},
		{"removal refused: kept and reported", m1, node("web-1", api.NodeRegistered), removal("web-1", api.RemoveRefused), "wait", "refused"},
		{"removal done: domain deleted", m1, node("web-1", api.NodeRegistered), removal("web-1", api.RemoveDone), "deleting", "node left"},
		{"stale removal from an earlier life: requested again", m1, node("web-1", api.NodeRegistered), func() *api.RemoveRequest {
			r := removal("web-1", api.RemoveDone)
			r.Metadata.CreatedAt = now.Add(-2 * time.Hour)
			return r
		}(), "request", ""},
		{"node removed: domain deleted", m1, node("web-1", api.NodeRemoved), nil, "deleting", ""},
		{"node never registered: domain deleted", m1, nil, nil, "deleting", ""},
		{"host still deleting: wait", machine("web", 1, "hv-1", func(m *api.Machine) { m.Spec.Deleting = true }), nil, nil, "wait", "deleting the domain"},
		{"host deleted the domain: object deleted", machine("web", 1, "hv-1", func(m *api.Machine) { m.Spec.Deleting = true; m.Status.Phase = api.MachineDeleted }), nil, nil, "delete", ""},
		{"never placed: object deleted", machine("web", 1, ""), nil, nil, "delete", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Now: now, Pools: []*api.MachinePool{pool("web", 1)}, Machines: []*api.Machine{machine("web", 0, "hv-1"), c.machine}, Hosts: hosts,
				Nodes: map[string]*api.Node{}, Removals: map[string]*api.RemoveRequest{}}
			if c.node != nil {
				in.Nodes[c.node.Metadata.Name] = c.node
			}
			if c.removal != nil {
				in.Removals[c.removal.Metadata.Name] = c.removal
			}
			pl := Compute(in)
			got := "wait"
			switch {
			case len(pl.RequestRemoval) == 1 && pl.RequestRemoval[0] == "web-1":
				got = "request"
			case len(pl.Update) == 1 && pl.Update[0].Spec.Deleting && !c.machine.Spec.Deleting:
				got = "deleting"
			case len(pl.Delete) == 1 && pl.Delete[0].Metadata.Name == "web-1":
				got = "delete"
			}
			if got != c.want || len(pl.Create) != 0 {
				t.Fatalf("got %s (%s), want %s", got, pl.Counts(), c.want)
			}
			if c.waitText != "" {
				if cond := poolCond(t, pl, api.CondScaleDown); cond == nil || !strings.Contains(cond.Message, c.waitText) {
					t.Fatalf("ScaleDown condition %+v, want %q", cond, c.waitText)
				}
			}
		})
	}
}

func TestMachinesOfDeletedPoolAreSurplus(t *testing.T) {
	pl := Compute(Input{Now: now, Machines: []*api.Machine{machine("gone", 0, "hv-1")}, Hosts: []*Host{host("hv-1", 8, 8192)},
		Nodes: map[string]*api.Node{"gone-0": node("gone-0", api.NodeRegistered)}})
	if !slices.Equal(pl.RequestRemoval, []string{"gone-0"}) {
		t.Fatalf("plan %s", pl.Counts())
	}
}

func TestComputeDoesNotChangeItsInput(t *testing.T) {
	h := host("hv-1", 8, 8192)
	m := machine("web", 0, "hv-1")
	p := pool("web", 3, func(p *api.MachinePool) { p.Spec.Template.MemoryMiB = 2048 })
	Compute(Input{Now: now, Pools: []*api.MachinePool{p}, Machines: []*api.Machine{m}, Hosts: []*Host{h}})
	if h.used.memMiB != 0 || m.Spec.Template.MemoryMiB != 1024 || len(p.Status.Conditions) != 0 {
		t.Fatalf("input changed: host used %+v, machine %+v, pool %+v", h.used, m.Spec.Template, p.Status)
	}
}

package hypervisor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

func TestChooseDomainType(t *testing.T) {
	both := []string{"kvm", "qemu"}
	for _, tc := range []struct {
		setting, failure string
		offered          []string
		want, why        string
	}{
		{"auto", "", both, "kvm", "libvirt offers kvm"},
		{"auto", "machine m-0 showed no sign", both, "qemu", "machine m-0 showed no sign"},
		{"auto", "", []string{"qemu"}, "qemu", "does not offer kvm"},
		{"auto", "", []string{"test"}, "test", "offers test"},
		{"auto", "", nil, "", "no domain type"},
		{"kvm", "machine m-0 showed no sign", both, "kvm", "hypervisor.domainType is kvm"},
		{"kvm", "", []string{"qemu"}, "kvm", "cannot be defined"},
		{"qemu", "", both, "qemu", "hypervisor.domainType is qemu"},
	} {
		typ, why := chooseDomainType(tc.setting, tc.offered, tc.failure)
		if typ != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s %v %q: %q (%s), want %q (%s)", tc.setting, tc.offered, tc.failure, typ, why, tc.want, tc.why)
		}
	}
}

// TestPlanRedefinesAStuckDomainOfAnotherType: a running domain is never
// touched for its type alone, only when its guest did not boot.
func TestPlanRedefinesAStuckDomainOfAnotherType(t *testing.T) {
	c := &Controller{domainType: "qemu"}
	m := placedMachine("web-0", "hv-1", 0)
	d := hypervisor.Domain{Spec: c.spec(m), State: hypervisor.Running}
	d.Spec.Type = "kvm"
	if got := planDomains([]*api.Machine{m}, []hypervisor.Domain{d}, c.spec, nil); len(got) != 0 {
		t.Fatalf("a booted kvm domain is touched: %v", kinds(got))
	}
	got := planDomains([]*api.Machine{m}, []hypervisor.Domain{d}, c.spec, map[string]bool{m.Spec.UUID: true})
	if len(got) != 1 || got[0].Kind != actRestart || got[0].Spec.Type != "qemu" || got[0].From != "kvm" || !slices.Equal(got[0].Why, []string{whyDomainType}) {
		t.Fatalf("stuck kvm domain: %+v", got)
	}
	d.Spec.Type = "qemu"
	if got := planDomains([]*api.Machine{m}, []hypervisor.Domain{d}, c.spec, map[string]bool{m.Spec.UUID: true}); len(got) != 0 {
		t.Fatalf("a stuck domain of the chosen type is restarted: %v", kinds(got))
	}
}

// clock is a settable time for the controller's Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func booted(t *testing.T, st *store.Store, name string) *api.Condition {
	t.Helper()
	return api.FindCondition(getMachine(t, st, name).Status.Conditions, api.CondBooted)
}

// TestBootCondition: a running domain's machine says Booting until its
// guest writes to the console or registers, and NotBooting, with what was
// seen and what to do, when nothing came within the boot timeout; under an
// explicit kvm the domain is left as it is.
func TestBootCondition(t *testing.T) {
	st := hvStore(t)
	fake := hypervisortest.NewFake(8, 8192)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Config{Node: "hv-1", DomainType: DomainTypeKVM, BootTimeout: time.Minute}, st, fake, logging.Test(t))
	c.Now = clk.now
	for i := 0; i < 3; i++ {
		putMachine(t, st, placedMachine([]string{"web-0", "web-1", "web-2"}[i], "hv-1", i))
	}
	once(t, c)
	for _, n := range []string{"web-0", "web-1", "web-2"} {
		if m := getMachine(t, st, n); m.Status.Phase != api.MachineRunning {
			t.Fatalf("%s %+v", n, m.Status)
		}
		if b := booted(t, st, n); b == nil || b.Status || b.Reason != reasonBooting {
			t.Fatalf("%s just started: %+v", n, b)
		}
	}
	// web-0 writes to its console, web-1 registers, web-2 shows only its
	// firmware's few lines.
	fake.WriteConsole(placedMachine("web-0", "", 0).Spec.UUID, 4000)
	fake.WriteConsole(placedMachine("web-2", "", 2).Spec.UUID, 40)
	n := api.NewNode("web-1")
	n.Status.Phase = api.NodeRegistered
	if err := st.Put(tctx(t), store.NodeKey("web-1"), n); err != nil {
		t.Fatal(err)
	}
	clk.advance(30 * time.Second)
	once(t, c)
	if b := booted(t, st, "web-0"); b == nil || !b.Status || !strings.Contains(b.Message, "console output") {
		t.Fatalf("web-0: %+v", b)
	}
	if b := booted(t, st, "web-1"); b == nil || !b.Status || !strings.Contains(b.Message, "node registered") {
		t.Fatalf("web-1: %+v", b)
	}
	if b := booted(t, st, "web-2"); b == nil || b.Status || b.Reason != reasonBooting {
		t.Fatalf("web-2 within the timeout: %+v", b)
	}
	clk.advance(30 * time.Second)
	if got := once(t, c); len(got) != 0 {
		t.Fatalf("under an explicit kvm a stuck domain is acted on: %v", got)
	}
	b := booted(t, st, "web-2")
	if b == nil || b.Status || b.Reason != reasonNotBooting || !strings.Contains(b.Message, "under 1024 bytes of console output, no address and no node registered") ||
		!strings.Contains(b.Message, "hypervisor.domainType") || !strings.Contains(b.Message, "type kvm") {
		t.Fatalf("web-2 after the timeout: %+v", b)
	}
	if m := getMachine(t, st, "web-2"); m.Status.Phase != api.MachineRunning || m.Status.DomainState != "running" {
		t.Fatalf("web-2 %+v", m.Status)
	}
	// Written once: the condition holds still.
	rev := getMachine(t, st, "web-2").Metadata.Revision
	clk.advance(time.Minute)
	once(t, c)
	if again := getMachine(t, st, "web-2"); again.Metadata.Revision != rev {
		t.Fatalf("NotBooting rewritten: %+v", again.Status)
	}
	// Booted only holds while the domain runs.
	if err := fake.Stop(tctx(t), placedMachine("web-2", "", 2).Spec.UUID, 0); err != nil {
		t.Fatal(err)
	}
	m := getMachine(t, st, "web-2")
	m.Spec.Deleting = true
	if err := st.Update(tctx(t), store.MachineKey("web-2"), m); err != nil {
		t.Fatal(err)
	}
	once(t, c)
	if b := booted(t, st, "web-2"); b != nil {
		t.Fatalf("a deleted machine keeps %+v", b)
	}
}

// TestAutoFallsBackToQEMU: in auto, kvm is chosen where the host offers it;
// a kvm guest that shows no sign of booting makes the host use qemu: that
// domain is redefined as qemu and restarted, the new ones are qemu, booted
// kvm domains are left alone, and the host's report says why.
func TestAutoFallsBackToQEMU(t *testing.T) {
	st := hvStore(t)
	fake := hypervisortest.NewFake(8, 8192)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Config{Node: "hv-1", BootTimeout: time.Minute}, st, fake, logging.Test(t))
	c.Now = clk.now
	good, stuck := placedMachine("web-0", "hv-1", 0), placedMachine("web-1", "hv-1", 1)
	putMachine(t, st, good)
	putMachine(t, st, stuck)
	once(t, c)
	ds := domainsOf(t, fake)
	if ds["web-0"].Spec.Type != "kvm" || ds["web-1"].Spec.Type != "kvm" {
		t.Fatalf("auto on a host with kvm: %+v", ds)
	}
	hv := api.NewHypervisor("hv-1")
	if err := st.Get(tctx(t), store.HypervisorKey("hv-1"), hv); err != nil || hv.Status.DomainType != "kvm" || !strings.Contains(hv.Status.DomainTypeReason, "offers kvm") {
		t.Fatalf("report %+v %v", hv.Status, err)
	}
	fake.WriteConsole(good.Spec.UUID, consoleBootBytes)
	clk.advance(time.Minute)
	if got := once(t, c); !slices.Equal(got, []string{"restart web-1"}) {
		t.Fatalf("actions %v, want the stuck domain restarted", got)
	}
	ds = domainsOf(t, fake)
	if ds["web-0"].Spec.Type != "kvm" || ds["web-1"].Spec.Type != "qemu" || ds["web-1"].State != hypervisor.Running {
		t.Fatalf("after the fallback: %+v", ds)
	}
	if b := booted(t, st, "web-1"); b == nil || b.Status || b.Reason != reasonBooting || !strings.Contains(b.Message, "redefined as qemu") {
		t.Fatalf("web-1 restarted as qemu: %+v", b)
	}
	if err := st.Get(tctx(t), store.HypervisorKey("hv-1"), hv); err != nil || hv.Status.DomainType != "qemu" || !strings.Contains(hv.Status.DomainTypeReason, "web-1 showed no sign of booting under kvm") {
		t.Fatalf("report after the fallback %+v %v", hv.Status, err)
	}
	putMachine(t, st, placedMachine("web-2", "hv-1", 2))
	once(t, c)
	if d := domainsOf(t, fake)["web-2"]; d.Spec.Type != "qemu" {
		t.Fatalf("a new domain after the fallback: %+v", d.Spec)
	}
	// Under qemu web-1 boots.
	fake.WriteConsole(stuck.Spec.UUID, consoleBootBytes)
	clk.advance(time.Second)
	once(t, c)
	if b := booted(t, st, "web-1"); b == nil || !b.Status {
		t.Fatalf("web-1 under qemu: %+v", b)
	}
}

// TestBootConditionOnLibvirt: on libvirt's test driver (which offers only
// its own type, and hands its running domains a DHCP lease) auto picks it,
// a running machine is Booted by its address, and an explicit kvm the host
// does not offer is refused with the reason on the machine.
func TestBootConditionOnLibvirt(t *testing.T) {
	st := hvStore(t)
	hv := libvirt.New(libvirttest.URI(t, libvirttest.Options{}), logging.Test(t))
	t.Cleanup(func() { hv.Close() })
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Config{Node: "hv-1", BootTimeout: time.Minute}, st, hv, logging.Test(t))
	c.Now = clk.now
	putMachine(t, st, placedMachine("web-0", "hv-1", 0))
	once(t, c)
	if d := domainsOf(t, hv)["web-0"]; d.Spec.Type != "test" || d.State != hypervisor.Running {
		t.Fatalf("domain %+v", d)
	}
	clk.advance(time.Minute)
	once(t, c)
	if b := booted(t, st, "web-0"); b == nil || !b.Status || !strings.Contains(b.Message, "an address (192.168.122.") {
		t.Fatalf("web-0: %+v", b)
	}

	k := New(Config{Node: "hv-1", DomainType: DomainTypeKVM}, st, hv, logging.Test(t))
	putMachine(t, st, placedMachine("web-1", "hv-1", 1))
	once(t, k)
	m := getMachine(t, st, "web-1")
	p := api.FindCondition(m.Status.Conditions, api.CondProvisioned)
	if m.Status.Phase != api.MachineFailed || p == nil || p.Status || p.Reason != "Unsupported" || !strings.Contains(p.Message, `domain type "kvm"`) || !strings.Contains(p.Message, "offers test") {
		t.Fatalf("kvm on a host without it: %+v", m.Status)
	}
}

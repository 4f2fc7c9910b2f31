package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

func hvStore(t *testing.T) *store.Store {
	t.Helper()
	c := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func placedMachine(name, host string, i int) *api.Machine {
	m := api.NewMachine(name)
	m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: "web", Ordinal: i, Host: host, UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		Template: api.MachineTemplate{VCPUs: 1, MemoryMiB: 256, DiskGiB: 2, BaseImage: "base.qcow2", Network: "default"}}
	return m
}

func putMachine(t *testing.T, st *store.Store, m *api.Machine) {
	t.Helper()
	if err := st.Put(tctx(t), store.MachineKey(m.Metadata.Name), m); err != nil {
		t.Fatal(err)
	}
}

func getMachine(t *testing.T, st *store.Store, name string) *api.Machine {
	t.Helper()
	m := &api.Machine{}
	if err := st.Get(tctx(t), store.MachineKey(name), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func kinds(as []domainAction) []string {
	var out []string
	for _, a := range as {
		out = append(out, string(a.Kind)+" "+machineName(a))
	}
	return out
}

func once(t *testing.T, c *Controller) []string {
	t.Helper()
	as, err := c.Once(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return kinds(as)
}

func domainsOf(t *testing.T, hv hypervisor.Hypervisor) map[string]hypervisor.Domain {
	t.Helper()
	ds, err := hv.Domains(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]hypervisor.Domain{}
	for _, d := range ds {
		out[d.Spec.Name] = d
	}
	return out
}

// TestHypervisorControllerOnLibvirt drives the controller against libvirt's
// test driver and real etcd: define, start, no restart without change,
// resize, scale down, undeclared and foreign domains, bad input.
func TestHypervisorControllerOnLibvirt(t *testing.T) {
	st := hvStore(t)
	hv := libvirt.New(libvirttest.URI(t, libvirttest.Options{VCPUs: 8, MemoryMiB: 4096, Foreign: []string{"theirs"}}), logging.Test(t))
	t.Cleanup(func() { hv.Close() })
	c := New(Config{Node: "hv-1", Labels: map[string]string{"rack": "a"}, Endpoints: []string{"http://127.0.0.1:2379"}, StopGrace: time.Second}, st, hv, logging.Test(t))

	for i := 0; i < 3; i++ {
		putMachine(t, st, placedMachine(fmt.Sprintf("web-%d", i), "hv-1", i))
	}
	other := placedMachine("elsewhere-0", "hv-2", 9)
	putMachine(t, st, other)

	t.Run("define and start", func(t *testing.T) {
		if got := once(t, c); len(got) != 3 || got[0] != "create web-0" {
			t.Fatalf("actions %v", got)
		}
		ds := domainsOf(t, hv)
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("web-%d", i)
			if ds[name].State != hypervisor.Running {
				t.Fatalf("%s: %+v", name, ds[name])
			}
			m := getMachine(t, st, name)
			if m.Status.Phase != api.MachineRunning || m.Status.DomainState != "running" || !api.FindCondition(m.Status.Conditions, api.CondProvisioned).Status {
				t.Fatalf("%s status %+v", name, m.Status)
			}
		}
		if _, ok := ds["elsewhere-0"]; ok {
			t.Fatal("a machine of another host was created here")
		}
		h := api.NewHypervisor("hv-1")
		if err := st.Get(tctx(t), store.HypervisorKey("hv-1"), h); err != nil || h.Status.MemoryMiB != 4096 || h.Status.VCPUs != 8 ||
			!slices.Contains(h.Status.Images, "default/base.qcow2") || h.Spec.Labels["rack"] != "a" {
			t.Fatalf("host report %+v %v", h, err)
		}
	})

	t.Run("no change, no restart", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if got := once(t, c); len(got) != 0 {
				t.Fatalf("pass %d: actions %v", i, got)
			}
		}
	})

	t.Run("discoverable and configured", func(t *testing.T) {
		if _, err := st.Client().Put(tctx(t), store.NixosConfigKey("web-0"), "{}"); err != nil {
			t.Fatal(err)
		}
		n := api.NewNode("web-1")
		n.Status.Phase = api.NodeRegistered
		if err := st.Put(tctx(t), store.NodeKey("web-1"), n); err != nil {
			t.Fatal(err)
		}
		if got := once(t, c); len(got) != 0 {
			t.Fatalf("actions %v", got)
		}
		w0, w1 := getMachine(t, st, "web-0"), getMachine(t, st, "web-1")
		if !w0.Status.HasConfiguration || w0.Status.Discoverable || w1.Status.HasConfiguration || !w1.Status.Discoverable {
			t.Fatalf("web-0 %+v\nweb-1 %+v", w0.Status, w1.Status)
		}
	})

	t.Run("a stopped domain is started", func(t *testing.T) {
		if err := hv.Stop(tctx(t), placedMachine("web-1", "", 1).Spec.UUID, 0); err != nil {
			t.Fatal(err)
		}
		if got := once(t, c); !slices.Equal(got, []string{"start web-1"}) {
			t.Fatalf("actions %v", got)
		}
	})

	t.Run("resize restarts only the resized domain", func(t *testing.T) {
		m := getMachine(t, st, "web-2")
		m.Spec.Template.MemoryMiB, m.Spec.Template.VCPUs = 512, 2
		if err := st.Update(tctx(t), store.MachineKey("web-2"), m); err != nil {
			t.Fatal(err)
		}
		if got := once(t, c); !slices.Equal(got, []string{"restart web-2"}) {
			t.Fatalf("actions %v", got)
		}
		if d := domainsOf(t, hv)["web-2"]; d.Spec.MemoryMiB != 512 || d.Spec.VCPUs != 2 || d.State != hypervisor.Running {
			t.Fatalf("after resize %+v", d)
		}
		if got := once(t, c); len(got) != 0 {
			t.Fatalf("second pass: %v", got)
		}
	})

	t.Run("scale down: a deleting machine's domain is removed", func(t *testing.T) {
		m := getMachine(t, st, "web-2")
		m.Spec.Deleting = true
		if err := st.Update(tctx(t), store.MachineKey("web-2"), m); err != nil {
			t.Fatal(err)
		}
		if got := once(t, c); !slices.Equal(got, []string{"delete web-2"}) {
			t.Fatalf("actions %v", got)
		}
		if _, ok := domainsOf(t, hv)["web-2"]; ok {
			t.Fatal("domain still there")
		}
		if m := getMachine(t, st, "web-2"); m.Status.Phase != api.MachineDeleted {
			t.Fatalf("status %+v", m.Status)
		}
	})

	t.Run("an undeclared nico domain is removed, a foreign one left alone", func(t *testing.T) {
		stray := hypervisortest.Spec("stray", "00000000-0000-4000-8000-0000000000ff")
		if err := hv.Define(tctx(t), stray); err != nil {
			t.Fatal(err)
		}
		if got := once(t, c); !slices.Equal(got, []string{"delete stray"}) {
			t.Fatalf("actions %v", got)
		}
		if err := hv.Define(tctx(t), hypervisortest.Spec("theirs", "00000000-0000-4000-8000-0000000000fe")); !errors.Is(err, hypervisor.ErrNameTaken) {
			t.Fatalf("the foreign domain is gone: %v", err)
		}
	})

	t.Run("bad input: a clear condition and nothing created", func(t *testing.T) {
		bad := placedMachine("web-7", "hv-1", 7)
		bad.Spec.Template.Network = "nope"
		putMachine(t, st, bad)
		once(t, c)
		m := getMachine(t, st, "web-7")
		cond := api.FindCondition(m.Status.Conditions, api.CondProvisioned)
		if m.Status.Phase != api.MachineFailed || cond == nil || cond.Status || cond.Reason != "UnknownNetwork" {
			t.Fatalf("status %+v", m.Status)
		}
		if _, ok := domainsOf(t, hv)["web-7"]; ok {
			t.Fatal("half-created domain")
		}
		// A failure that persists is not written again and again.
		once(t, c)
		if again := getMachine(t, st, "web-7"); again.Metadata.Revision != m.Metadata.Revision {
			t.Fatalf("status rewritten for the same failure: %+v", again.Status)
		}
	})
}

// TestHypervisorControllerRetriesWithoutDuplicates loses the hypervisor in
// the middle of passes: every domain is defined once, and Run converges.
func TestHypervisorControllerRetriesWithoutDuplicates(t *testing.T) {
	st := hvStore(t)
	fake := hypervisortest.NewFake(8, 8192)
	c := New(Config{Node: "hv-1", Resync: 50 * time.Millisecond}, st, fake, logging.Test(t))
	for i := 0; i < 3; i++ {
		putMachine(t, st, placedMachine(fmt.Sprintf("web-%d", i), "hv-1", i))
	}
	fake.FailNext("Host", fmt.Errorf("%w: connection reset", hypervisor.ErrUnavailable))
	if _, err := c.Once(tctx(t)); !errors.Is(err, hypervisor.ErrUnavailable) {
		t.Fatalf("pass with the hypervisor down: %v", err)
	}
	fake.FailNext("Start", fmt.Errorf("%w: connection reset", hypervisor.ErrUnavailable))
	if _, err := c.Once(tctx(t)); !errors.Is(err, hypervisor.ErrUnavailable) {
		t.Fatalf("pass losing the hypervisor: %v", err)
	}
	ctx, cancel := context.WithCancel(tctx(t))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds := domainsOf(t, fake)
		running := 0
		for _, d := range ds {
			if d.State == hypervisor.Running {
				running++
			}
		}
		if running == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("domains %+v", ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := fake.Calls("Define"); n != 3 {
		t.Fatalf("%d defines for 3 machines", n)
	}
}

func TestPlanDomains(t *testing.T) {
	c := &Controller{}
	m := placedMachine("web-0", "hv-1", 0)
	same := hypervisor.Domain{Spec: c.spec(m), State: hypervisor.Running}
	stopped := same
	stopped.State = hypervisor.Shutoff
	bigger := same
	bigger.Spec.MemoryMiB = 128
	deleting := placedMachine("web-0", "hv-1", 0)
	deleting.Spec.Deleting = true
	stray := hypervisor.Domain{Spec: hypervisor.DomainSpec{UUID: "x", Name: "stray"}, State: hypervisor.Running}
	for _, tc := range []struct {
		name     string
		machines []*api.Machine
		domains  []hypervisor.Domain
		want     []string
	}{
		{"create", []*api.Machine{m}, nil, []string{"create web-0"}},
		{"unchanged running", []*api.Machine{m}, []hypervisor.Domain{same}, nil},
		{"stopped", []*api.Machine{m}, []hypervisor.Domain{stopped}, []string{"start web-0"}},
		{"resized running", []*api.Machine{m}, []hypervisor.Domain{bigger}, []string{"restart web-0"}},
		{"deleting", []*api.Machine{deleting}, []hypervisor.Domain{same}, []string{"delete web-0"}},
		{"deleting, gone", []*api.Machine{deleting}, nil, nil},
		{"stray removed first", []*api.Machine{m}, []hypervisor.Domain{stray}, []string{"delete stray", "create web-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kinds(planDomains(tc.machines, tc.domains, c.spec, nil)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

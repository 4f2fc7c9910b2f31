package hypervisortest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/hypervisor"
)

// Env is one fresh host for a contract case: a "default" network, a
// "default" storage pool with the image "base.qcow2", and the domains that
// are not nico's that the case asked for, by name.
type Env struct {
	HV      hypervisor.Hypervisor
	Foreign map[string]string // name -> UUID
}

// Spec returns a valid spec for machine name with the given UUID.
func Spec(name, uuid string) hypervisor.DomainSpec {
	return hypervisor.DomainSpec{UUID: uuid, Name: name, Pool: "pool", VCPUs: 1, MemoryMiB: 256, DiskGiB: 2,
		StoragePool: "default", BaseImage: "base.qcow2", Network: "default", MAC: hypervisor.MAC(name),
		Identity: hypervisor.Identity{Name: name, Endpoints: []string{"http://127.0.0.1:2379"}, Roles: []string{"worker"}}}
}

// Contract runs the cases every Hypervisor must pass; newEnv returns a
// fresh host for each, with the foreign domains named.
func Contract(t *testing.T, newEnv func(t *testing.T, foreign ...string) Env) {
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return c
	}
	const u1, u2 = "11111111-2222-4333-8444-555555555501", "11111111-2222-4333-8444-555555555502"

	t.Run("host", func(t *testing.T) {
		e := newEnv(t)
		h, err := e.HV.Host(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if h.VCPUs <= 0 || h.MemoryMiB <= 0 || h.DiskGiB["default"] <= 0 || !slices.Contains(h.Networks, "default") || !slices.Contains(h.Images, "default/base.qcow2") {
			t.Fatalf("host %+v", h)
		}
	})

	t.Run("define start stop undefine", func(t *testing.T) {
		e := newEnv(t)
		s := Spec("vm-1", u1)
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		d := one(t, e.HV)
		if d.State != hypervisor.Shutoff || d.Spec.UUID != u1 || d.Spec.Name != "vm-1" || d.Spec.Pool != "pool" || len(s.Differs(d.Spec)) != 0 {
			t.Fatalf("defined %+v, differs %v", d, s.Differs(d.Spec))
		}
		// Defining again is idempotent: still one domain.
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := e.HV.Start(ctx(t), u1); err != nil {
				t.Fatalf("start %d: %v", i, err)
			}
		}
		if d := one(t, e.HV); d.State != hypervisor.Running {
			t.Fatalf("state %s after start", d.State)
		}
		// A new image never applies to a live domain: it reads back the
		// definition.
		if h, _ := e.HV.Host(ctx(t)); slices.ContainsFunc(h.Images, func(i string) bool { return i == "default/"+hypervisor.VolumeName(u1) }) {
			t.Fatalf("nico's volume reported as an image: %v", h.Images)
		}
		for i := 0; i < 2; i++ {
			if err := e.HV.Stop(ctx(t), u1, time.Second); err != nil {
				t.Fatalf("stop %d: %v", i, err)
			}
		}
		if d := one(t, e.HV); d.State != hypervisor.Shutoff {
			t.Fatalf("state %s after stop", d.State)
		}
		if err := e.HV.Undefine(ctx(t), u1); err != nil {
			t.Fatal(err)
		}
		if ds, err := e.HV.Domains(ctx(t)); err != nil || len(ds) != 0 {
			t.Fatalf("after undefine: %v %v", ds, err)
		}
		// The volume went with it: the same UUID can be defined afresh.
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("resize reads back; disk grows, never shrinks", func(t *testing.T) {
		e := newEnv(t)
		s := Spec("vm-1", u1)
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		s.VCPUs, s.MemoryMiB = 2, 512
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		if d := one(t, e.HV); len(s.Differs(d.Spec)) != 0 {
			t.Fatalf("after resize: %+v differs in %v", d.Spec, s.Differs(d.Spec))
		}
		s.DiskGiB = 4
		if err := e.HV.Define(ctx(t), s); errors.Is(err, hypervisor.ErrUnsupported) {
			t.Logf("growing a disk: %v", err)
			return
		} else if err != nil {
			t.Fatal(err)
		}
		d := one(t, e.HV)
		if diff := s.Differs(d.Spec); len(diff) != 0 || d.Spec.DiskGiB != 4 {
			t.Fatalf("after growing the disk: %+v differs in %v", d.Spec, diff)
		}
		s.DiskGiB = 1
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		if d := one(t, e.HV); d.Spec.DiskGiB != 4 {
			t.Fatalf("disk shrank to %d", d.Spec.DiskGiB)
		}
	})

	t.Run("direct kernel boot reads back", func(t *testing.T) {
		e := newEnv(t)
		s := Spec("vm-1", u1)
		s.Kernel, s.Initrd, s.Cmdline = "/var/lib/nico/vmlinuz", "/var/lib/nico/initrd.img", "console=ttyS0 quiet"
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		if d := one(t, e.HV); len(s.Differs(d.Spec)) != 0 {
			t.Fatalf("kernel boot: %+v differs in %v", d.Spec, s.Differs(d.Spec))
		}
		s.Cmdline = "console=ttyS0"
		if diff := s.Differs(one(t, e.HV).Spec); !slices.Equal(diff, []string{"boot"}) {
			t.Fatalf("changed cmdline differs in %v, want [boot]", diff)
		}
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		s.Kernel, s.Initrd, s.Cmdline = "", "", ""
		if diff := s.Differs(one(t, e.HV).Spec); !slices.Equal(diff, []string{"boot"}) {
			t.Fatalf("disk boot against a kernel-booted domain differs in %v, want [boot]", diff)
		}
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		if d := one(t, e.HV); len(s.Differs(d.Spec)) != 0 {
			t.Fatalf("back to disk boot: %+v differs in %v", d.Spec, s.Differs(d.Spec))
		}
	})

	t.Run("domain types: each offered one reads back, others are refused", func(t *testing.T) {
		e := newEnv(t)
		h, err := e.HV.Host(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(h.DomainTypes) == 0 {
			t.Fatalf("host offers no domain type: %+v", h)
		}
		s := Spec("vm-1", u1)
		if err := e.HV.Define(ctx(t), s); err != nil {
			t.Fatal(err)
		}
		if d := one(t, e.HV); !slices.Contains(h.DomainTypes, d.Spec.Type) {
			t.Fatalf("default type %q is not one the host offers (%v)", d.Spec.Type, h.DomainTypes)
		}
		for _, typ := range h.DomainTypes {
			s.Type = typ
			if err := e.HV.Define(ctx(t), s); err != nil {
				t.Fatalf("define as %s: %v", typ, err)
			}
			if d := one(t, e.HV); d.Spec.Type != typ || len(s.Differs(d.Spec)) != 0 {
				t.Fatalf("defined as %s, read back %+v", typ, d.Spec)
			}
		}
		bad := Spec("vm-2", u2)
		bad.Type = "nosuchtype"
		if err := e.HV.Define(ctx(t), bad); !errors.Is(err, hypervisor.ErrUnsupported) {
			t.Fatalf("define as a type the host does not offer: %v, want ErrUnsupported", err)
		}
		if ds, _ := e.HV.Domains(ctx(t)); len(ds) != 1 {
			t.Fatalf("after a refused type: %+v", ds)
		}
	})

	t.Run("console: empty until the guest writes, reset by a stop", func(t *testing.T) {
		e := newEnv(t)
		if err := e.HV.Define(ctx(t), Spec("vm-1", u1)); err != nil {
			t.Fatal(err)
		}
		if n, err := e.HV.ConsoleBytes(ctx(t), u1); err != nil || n != 0 {
			t.Fatalf("console of a domain never started: %d %v", n, err)
		}
		if err := e.HV.Start(ctx(t), u1); err != nil {
			t.Fatal(err)
		}
		// The hosts of the contract run no guest: nothing is written.
		if n, err := e.HV.ConsoleBytes(ctx(t), u1); err != nil || n != 0 {
			t.Fatalf("console of a running domain whose guest wrote nothing: %d %v", n, err)
		}
		if err := e.HV.Stop(ctx(t), u1, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := e.HV.ConsoleBytes(ctx(t), u1); err != nil || n != 0 {
			t.Fatalf("console of a stopped domain: %d %v", n, err)
		}
	})

	t.Run("foreign domains are never listed nor taken over", func(t *testing.T) {
		e := newEnv(t, "theirs")
		fu := e.Foreign["theirs"]
		if ds, err := e.HV.Domains(ctx(t)); err != nil || len(ds) != 0 {
			t.Fatalf("foreign listed: %v %v", ds, err)
		}
		if err := e.HV.Define(ctx(t), Spec("theirs", u1)); !errors.Is(err, hypervisor.ErrNameTaken) {
			t.Fatalf("define over a foreign name: %v", err)
		}
		for name, f := range map[string]func() error{
			"start":    func() error { return e.HV.Start(ctx(t), fu) },
			"stop":     func() error { return e.HV.Stop(ctx(t), fu, time.Second) },
			"undefine": func() error { return e.HV.Undefine(ctx(t), fu) },
			"console":  func() error { _, err := e.HV.ConsoleBytes(ctx(t), fu); return err },
		} {
			if err := f(); !errors.Is(err, hypervisor.ErrNotFound) {
				t.Fatalf("%s of a foreign domain: %v, want ErrNotFound", name, err)
			}
		}
		if ds, _ := e.HV.Domains(ctx(t)); len(ds) != 0 {
			t.Fatalf("half-created domain: %+v", ds)
		}
	})

	t.Run("a name is one domain", func(t *testing.T) {
		e := newEnv(t)
		if err := e.HV.Define(ctx(t), Spec("vm-1", u1)); err != nil {
			t.Fatal(err)
		}
		if err := e.HV.Define(ctx(t), Spec("vm-1", u2)); !errors.Is(err, hypervisor.ErrNameTaken) {
			t.Fatalf("second UUID for a name: %v", err)
		}
	})

	t.Run("bad input creates nothing", func(t *testing.T) {
		e := newEnv(t)
		for _, c := range []struct {
			mod  func(*hypervisor.DomainSpec)
			want error
		}{
			{func(s *hypervisor.DomainSpec) { s.Network = "nope" }, hypervisor.ErrNoNetwork},
			{func(s *hypervisor.DomainSpec) { s.BaseImage = "nope.qcow2" }, hypervisor.ErrNoImage},
			{func(s *hypervisor.DomainSpec) { s.StoragePool = "nope" }, hypervisor.ErrNoStoragePool},
		} {
			s := Spec("vm-1", u1)
			c.mod(&s)
			if err := e.HV.Define(ctx(t), s); !errors.Is(err, c.want) {
				t.Fatalf("define %+v: %v, want %v", s, err, c.want)
			}
		}
		if ds, err := e.HV.Domains(ctx(t)); err != nil || len(ds) != 0 {
			t.Fatalf("half-created: %+v %v", ds, err)
		}
		for _, f := range []func() error{
			func() error { return e.HV.Start(ctx(t), u2) },
			func() error { return e.HV.Stop(ctx(t), u2, time.Second) },
			func() error { return e.HV.Undefine(ctx(t), u2) },
			func() error { _, err := e.HV.ConsoleBytes(ctx(t), u2); return err },
		} {
			if err := f(); !errors.Is(err, hypervisor.ErrNotFound) {
				t.Fatalf("unknown UUID: %v", err)
			}
		}
	})
}

func one(t *testing.T, hv hypervisor.Hypervisor) hypervisor.Domain {
	t.Helper()
	ds, err := hv.Domains(context.Background())
	if err != nil || len(ds) != 1 {
		t.Fatalf("domains: %+v %v, want one", ds, err)
	}
	return ds[0]
}

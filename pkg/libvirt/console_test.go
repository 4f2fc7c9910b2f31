//go:build cgo

package libvirt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/logging"
	"libvirt.org/go/libvirt"
)

// TestConsoleBytes: with a console directory, a domain is defined with its
// serial console logged there, ConsoleBytes reads the log's size while
// the domain runs (the test driver runs no guest, so the test writes it),
// and Undefine removes the log.
func TestConsoleBytes(t *testing.T) {
	ctx := context.Background()
	hv := New(libvirttest.URI(t, libvirttest.Options{}), logging.Test(t))
	t.Cleanup(func() { hv.Close() })
	hv.ConsoleDir = t.TempDir()
	const u = "11111111-2222-4333-8444-555555555501"
	if err := hv.Define(ctx, hypervisortest.Spec("vm-1", u)); err != nil {
		t.Fatal(err)
	}
	c, err := hv.connect()
	if err != nil {
		t.Fatal(err)
	}
	d, p, err := hv.lookup(c, u)
	if err != nil {
		t.Fatal(err)
	}
	d.Free()
	log := filepath.Join(hv.ConsoleDir, "nico-"+u+"-console.log")
	if p.consoleLog != log {
		t.Fatalf("console log %q, want %q", p.consoleLog, log)
	}
	if err := hv.Start(ctx, u); err != nil {
		t.Fatal(err)
	}
	if n, err := hv.ConsoleBytes(ctx, u); err != nil || n != 0 {
		t.Fatalf("before the guest wrote: %d %v", n, err)
	}
	if err := os.WriteFile(log, []byte(strings.Repeat("x", 42)), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := hv.ConsoleBytes(ctx, u); err != nil || n != 42 {
		t.Fatalf("after 42 bytes: %d %v", n, err)
	}
	if err := hv.Stop(ctx, u, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := hv.ConsoleBytes(ctx, u); err != nil || n != 0 {
		t.Fatalf("stopped: %d %v", n, err)
	}
	if err := hv.Undefine(ctx, u); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Fatalf("console log of an undefined domain: %v", err)
	}
}

// TestConsoleDirFor: console logs are kept only where the agent can read
// them, a local system daemon's.
func TestConsoleDirFor(t *testing.T) {
	for uri, want := range map[string]string{
		"qemu:///system":             "/var/log/libvirt/qemu",
		"qemu+unix:///system":        "/var/log/libvirt/qemu",
		"qemu:///session":            "",
		"qemu+ssh://hv-2/system":     "",
		"qemu+tcp://10.0.0.2/system": "",
		"test:///default":            "",
	} {
		if got := consoleDirFor(uri); got != want {
			t.Errorf("%s: %q, want %q", uri, got, want)
		}
	}
}

// TestDomainTypesOfTheTestDriver: the test driver offers its own type only,
// and the default type is it.
func TestDomainTypesOfTheTestDriver(t *testing.T) {
	c, err := libvirt.NewConnect(libvirttest.URI(t, libvirttest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ts, err := domainTypes(c); err != nil || len(ts) != 1 || ts[0] != "test" || detectType(c) != "test" {
		t.Fatalf("types %v %v, default %s", ts, err, detectType(c))
	}
}

package systemd

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// contractUnit is safe to start, stop and kill, runs a main process until
// it is stopped, and is inactive at first, as pkg/member's UnitManager
// contract wants.
const contractUnit = `[Unit]
Description=nico: a unit for pkg/member's D-Bus contract test

[Service]
Type=simple
ExecStart=/bin/sleep infinity
`

// TestMemberDBusContract runs pkg/member's TestDBusUnitsContract (the
// UnitManager contract over systemd's D-Bus API, DBusUnits) inside a guest,
// against its real systemd and system bus: the test binary runs there as
// it would on a host, and must pass, not skip.
func TestMemberDBusContract(t *testing.T) {
	harness.Skip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := dir + "/member.test"
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./pkg/member")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./pkg/member: %v\n%s", err, out)
	}
	const guestBin = "/usr/local/libexec/nico-member.test"
	h, err := harness.Boot(ctx, t, harness.Config{
		Name:  "contract",
		Files: map[string]harness.File{"/etc/systemd/system/nico-contract.service": {Data: []byte(contractUnit)}},
		Binds: []harness.Bind{{Src: bin, Dst: guestBin, RO: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.Command(ctx, "/usr/bin/env", "NICO_SYSTEMD_TEST_UNIT=nico-contract.service", guestBin,
		"-test.run", "^TestDBusUnitsContract$", "-test.v", "-test.count=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pkg/member's TestDBusUnitsContract in %s:\n%s", h.Name, out)
	if err != nil {
		t.Fatalf("pkg/member's D-Bus contract failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestDBusUnitsContract") {
		t.Fatalf("pkg/member's D-Bus contract did not run (skipped?)")
	}
}

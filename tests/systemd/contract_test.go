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
	runMemberTest(ctx, t, harness.Config{
		Name:  "contract",
		Files: map[string]harness.File{"/etc/systemd/system/nico-contract.service": {Data: []byte(contractUnit)}},
	}, "TestDBusUnitsContract", "NICO_SYSTEMD_TEST_UNIT=nico-contract.service")
}

// runMemberTest builds pkg/member's test binary, boots a guest from cfg
// with the binary bound in, and runs test there with env; test must pass,
// not skip.
func runMemberTest(ctx context.Context, t *testing.T, cfg harness.Config, test string, env ...string) {
	t.Helper()
	bin := t.TempDir() + "/member.test"
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./pkg/member")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./pkg/member: %v\n%s", err, out)
	}
	const guestBin = "/usr/local/libexec/nico-member.test"
	cfg.Binds = append(cfg.Binds, harness.Bind{Src: bin, Dst: guestBin, RO: true})
	h, err := harness.Boot(ctx, t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"/usr/bin/env"}, env...), guestBin, "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	out, err := h.Command(ctx, args...).CombinedOutput()
	t.Logf("pkg/member's %s in %s:\n%s", test, h.Name, out)
	if err != nil {
		t.Fatalf("pkg/member's %s failed: %v", test, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("pkg/member's %s did not run (skipped?)", test)
	}
}

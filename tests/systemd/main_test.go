// Package systemd is the real-systemd tier: the unit files nico's NixOS
// module renders (testdata/, make systemd-fixtures) run under Debian's
// systemd booted as PID 1 of its own namespaces (harness), with the real
// agent, coordinator and etcd binaries. It needs root; make test runs it.
package systemd

import (
	"os"
	"testing"

	"github.com/homystack/nico/tests/systemd/harness"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	harness.RunGuestIfRequested()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

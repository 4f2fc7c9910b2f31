package systemd

import (
	"os"
	"testing"

	"github.com/homystack/nico/tests/systemd/harness"
	"go.uber.org/goleak"
)

// TestMain runs a guest stage when this binary was re-exec'd as one
// (harness), and checks for leaked goroutines after the tests.
func TestMain(m *testing.M) {
	harness.RunGuestIfRequested()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

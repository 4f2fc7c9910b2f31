package systemd

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// TestBoot boots a bare guest and powers it off: the harness itself.
func TestBoot(t *testing.T) {
	harness.Skip(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	h, err := harness.Boot(ctx, t, harness.Config{Name: "bare"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted in %v", time.Since(start))
	out, err := h.Exec(ctx, "systemctl", "list-units", "--failed", "--no-legend")
	t.Logf("failed units: %s %v", out, err)
	out, _ = h.Exec(ctx, "systemctl", "list-units", "--no-legend", "--state=active")
	t.Logf("%s", out)
	start = time.Now()
	h.Shutdown()
	t.Logf("shut down in %v", time.Since(start))
	t.Log(h.Console())
}

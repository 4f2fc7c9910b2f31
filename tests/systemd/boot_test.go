package systemd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// TestBoot boots a bare guest to its target with no unit failed, and
// powers it off: the harness itself.
func TestBoot(t *testing.T) {
	harness.Skip(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	h, err := harness.Boot(ctx, t, harness.Config{Name: "bare"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted in %v", time.Since(start).Round(time.Millisecond))
	out, err := h.Exec(ctx, "systemctl", "list-units", "--failed", "--no-legend", "--plain")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("failed units: %v\n%s", err, out)
	}
	start = time.Now()
	h.Shutdown()
	t.Logf("powered off in %v", time.Since(start).Round(time.Millisecond))
}

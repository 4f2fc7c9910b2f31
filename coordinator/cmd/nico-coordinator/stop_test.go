package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/logging"
)

// stopCoordinator sends the test process SIGTERM (what systemd sends) and
// waits for run, whose exit code comes on code, to return 0.
func stopCoordinator(t *testing.T, code chan int, out *logging.Buffer) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0:\n%s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nico-coordinator did not stop on SIGTERM:\n%s", out.String())
	}
}

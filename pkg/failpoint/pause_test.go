//go:build failpoints

package failpoint

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/testwait"
)

// TestPauseHelper hits CoordBeforePromote twice; it is the process
// TestPause runs.
func TestPauseHelper(t *testing.T) {
	if os.Getenv("NICO_FAILPOINT_HELPER") != "1" {
		t.Skip("helper process for TestPause")
	}
	Hit(CoordBeforePromote)
	Hit(CoordBeforePromote)
}

// TestPause: a point armed with ":pause" blocks at its first hit until
// released, then lets every later hit through; the process does not exit
// at it.
func TestPause(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPauseHelper$")
	cmd.Env = append(os.Environ(), "NICO_FAILPOINT_HELPER=1", Env+"="+CoordBeforePromote+":"+ModePause, EnvDir+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testwait.True(t, 10*time.Second, "the point reached", func() bool {
		_, err := os.Stat(ReachedFile(dir, CoordBeforePromote))
		return err == nil
	})
	select {
	case err := <-done:
		t.Fatalf("helper went past a paused point: %v", err)
	default:
	}
	if err := os.WriteFile(ReleaseFile(dir, CoordBeforePromote), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("helper after release: %v", err)
	}
}

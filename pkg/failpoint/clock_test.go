package failpoint

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestClockHelper checks what Clock makes of a real clock with
// EnvClockFile set (to a file holding 2h); it is the process
// TestClockReadsItsFile runs, not a test of its own.
func TestClockHelper(t *testing.T) {
	if os.Getenv("NICO_FAILPOINT_HELPER") != "clock" {
		t.Skip("helper process for TestClockReadsItsFile")
	}
	real := clockwork.NewRealClock()
	c := Clock(real)
	if !armedBuild {
		if c != real {
			t.Fatalf("default build: Clock wrapped the clock (%T)", c)
		}
		return
	}
	if got := time.Until(c.Now()).Round(time.Minute); got != 2*time.Hour {
		t.Errorf("armed build: offset %s, want the file's 2h", got)
	}
}

// TestClockReadsItsFile runs the helper with EnvClockFile naming a file
// that holds 2h: the default build leaves the clock as it is; built with
// -tags failpoints, Now is 2 h ahead.
func TestClockReadsItsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(file, []byte("2h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClockHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "NICO_FAILPOINT_HELPER=clock", EnvClockFile+"="+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

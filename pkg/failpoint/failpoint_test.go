package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHitHelper hits every point; it is the process TestHit runs, not a
// test of its own.
func TestHitHelper(t *testing.T) {
	if os.Getenv("NICO_FAILPOINT_HELPER") != "1" {
		t.Skip("helper process for TestHit")
	}
	for _, n := range All {
		Hit(n)
	}
}

// TestHit runs the helper with every point armed: the default build goes
// through all of them; built with -tags failpoints, it exits at the first
// with ExitCode.
func TestHit(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitHelper$")
	cmd.Env = append(os.Environ(), "NICO_FAILPOINT_HELPER=1", Env+"="+strings.Join(All, ","))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case armedBuild && (!errors.As(err, &ee) || ee.ExitCode() != ExitCode):
		t.Fatalf("armed build: helper returned %v, want exit %d\n%s", err, ExitCode, out)
	case !armedBuild && err != nil:
		t.Fatalf("default build: helper returned %v, want to go through every point\n%s", err, out)
	}
}

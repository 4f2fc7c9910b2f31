package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// nicoctlBuild is the nicoctl binary this test binary builds once, the
// first time a test asks for it.
var nicoctlBuild struct {
	once sync.Once
	dir  string // the temporary directory it is built into
	path string
	err  error
}

// TestMain removes the nicoctl binary after the tests, if one was built.
func TestMain(m *testing.M) {
	code := m.Run()
	if nicoctlBuild.dir != "" {
		os.RemoveAll(nicoctlBuild.dir)
	}
	os.Exit(code)
}

// nicoctlBin builds ./coordinator/cmd/nicoctl with go build, once per test
// binary, and returns the binary's path. Tests call it before they start a
// fleet so that the build's time falls outside their deadlines.
func nicoctlBin(t *testing.T) string {
	t.Helper()
	b := &nicoctlBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "nico-integration-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "nicoctl")
		cmd := exec.Command("go", "build", "-o", b.path, "./coordinator/cmd/nicoctl")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./coordinator/cmd/nicoctl: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// runNicoctl runs the nicoctl binary with args, as an operator would, and
// returns its exit code, standard output and standard error.
func runNicoctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(t.Context(), nicoctlBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		code = exit.ExitCode()
	default:
		t.Fatalf("nicoctl %q: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

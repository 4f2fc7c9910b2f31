package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds nico-agent, nico-coordinator and nicoctl built with -tags
// failpoints, once per test binary.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "nico-faults-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", dir+string(filepath.Separator),
			"github.com/homystack/nico/agent/cmd/nico-agent", "github.com/homystack/nico/coordinator/cmd/nico-coordinator",
			"github.com/homystack/nico/coordinator/cmd/nicoctl")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build the failpoint binaries:", err)
			return 1
		}
		binDir = dir
	}
	code := m.Run()
	if len(rows) > 0 {
		fmt.Fprintf(os.Stderr, "\nfault scenarios:\n%s", summary())
	}
	if err := writeReport(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

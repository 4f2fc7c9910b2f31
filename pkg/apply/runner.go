package apply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Cmd is one command to run.
type Cmd struct {
	Name string
	Args []string
	// Env is added to the runner's own environment.
	Env []string
	Dir string
}

// String shows the command line.
func (c Cmd) String() string { return strings.TrimSpace(c.Name + " " + strings.Join(c.Args, " ")) }

// Runner runs commands. The real one is ExecRunner; tests use a fake that
// simulates a NixOS machine.
type Runner interface {
	// Run runs c and returns its standard output; a failure's error holds
	// the end of its standard error.
	Run(ctx context.Context, c Cmd) ([]byte, error)
}

// ExecRunner runs commands as child processes.
type ExecRunner struct{}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, c Cmd) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", c, err, tail(errb.String(), 400))
	}
	return out.Bytes(), nil
}

// tail keeps the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// lastLine returns the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

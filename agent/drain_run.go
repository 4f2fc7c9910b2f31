package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DrainTail is how much of a drain command's output the agent keeps (its
// last bytes, standard output and error together) unless
// DrainConfig.OutputTail says otherwise.
const DrainTail = 2048

// drainResult is what one run of a drain command gave.
type drainResult struct {
	ExitCode int // -1: killed at the timeout, or it never started
	TimedOut bool
	Output   string // the tail, at most the bytes runDrain is given
	Err      error  // why it did not exit 0 (nil: it did)
}

// runDrain runs command with env added to the agent's environment, in its
// own process group, and kills the group at timeout (or when ctx ends):
// a command that forks and hangs cannot outlive its bound. The last
// tailBytes of its output are kept.
func runDrain(ctx context.Context, command []string, env []string, timeout time.Duration, tailBytes int) drainResult {
	if len(command) == 0 {
		return drainResult{ExitCode: -1, Err: errors.New("empty command")}
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tail := &tailBuffer{max: tailBytes}
	cmd := exec.CommandContext(rctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second // a grandchild holding the pipes does not hold the agent
	err := cmd.Run()
	res := drainResult{ExitCode: 0, Output: tail.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return res
	case rctx.Err() != nil && ctx.Err() == nil:
		res.ExitCode, res.TimedOut, res.Err = -1, true, fmt.Errorf("%q ran past its timeout %s and was killed", command[0], timeout)
		if errors.As(err, &exit) && exit.ExitCode() >= 0 {
			res.ExitCode = exit.ExitCode()
		}
	case errors.As(err, &exit):
		res.ExitCode, res.Err = exit.ExitCode(), fmt.Errorf("%q exited with %d: %w", command[0], exit.ExitCode(), err)
	default:
		res.ExitCode, res.Err = -1, fmt.Errorf("run %q: %w", command[0], err)
	}
	return res
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write implements io.Writer.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

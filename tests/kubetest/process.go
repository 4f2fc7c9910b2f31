package kubetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopGrace is how long Stop waits after SIGTERM before it kills.
const StopGrace = 30 * time.Second

// Process is one control-plane component running as a child process, its
// output in a log file.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // set before done closes

	stopOnce sync.Once
	stopErr  error
}

// StartProcess runs bin with args, its standard output and error appended
// to logPath. The child gets SIGKILL when the test process dies, so a
// crashed test leaves no API server behind.
func StartProcess(name, logPath, bin string, args ...string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("kubetest: %s log: %w", name, err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited returns how the process ended, once it has.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to StopGrace for the exit, then kills. It is
// idempotent; an exit by SIGTERM is not an error.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopGrace):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("kubetest: %s did not stop within %s of SIGTERM, killed; log %s ends:\n%s", p.Name, StopGrace, p.LogPath, p.Tail(3000))
		}
	})
	return p.stopErr
}

// Tail returns the last n bytes of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// exitError describes a process that exited while it was awaited.
func (p *Process) exitError(what string) error {
	_, err := p.Exited()
	return fmt.Errorf("kubetest: %s exited (%v) before %s; log %s ends:\n%s", p.Name, err, what, p.LogPath, p.Tail(2000))
}

// FreePort returns a TCP port on host that was free a moment ago.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("kubetest: free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errNotReady is a readiness probe's answer other than 200.
var errNotReady = errors.New("not ready")

// RSS is the process's resident memory in bytes (VmRSS of /proc/PID/status).
func (p *Process) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("kubetest: %s rss: %w", p.Name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("kubetest: %s rss %q: %w", p.Name, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("kubetest: %s: no VmRSS", p.Name)
}

package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Config describes one guest.
type Config struct {
	Name  string          // hostname, container= and the cgroup's name
	Files map[string]File // guest path -> file, laid over the host's root
	Users []User          // system users added to /etc/passwd and /etc/group
	Binds []Bind          // host paths bound into the guest
	// BootTimeout bounds the boot until the target is reached (30s when zero).
	BootTimeout time.Duration
}

// Host is one booted guest.
type Host struct {
	Name string
	// PID is systemd's PID in the host's PID namespace.
	PID int

	t       testing.TB
	cmd     *exec.Cmd
	exited  chan struct{}
	cgroups []string // the cgroup dirs made for the guest
	log     string
	booted  bool // systemd reported its boot done (and so handles signals)
	stopped bool
}

// Skip skips t unless this machine can boot guests: root, and Debian's
// systemd installed.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the real-systemd tier needs root (namespaces, mounts, cgroups)")
	}
	if _, err := os.Stat(SystemdPath); err != nil {
		t.Skipf("no %s (Debian package systemd): %v", SystemdPath, err)
	}
}

// Boot starts a guest and waits until its systemd reached Target (or
// degraded) and its system bus answers. The guest is shut down when the
// test ends.
func Boot(ctx context.Context, t testing.TB, c Config) (*Host, error) {
	dir, err := os.MkdirTemp("", "nico-sd-"+c.Name+"-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	layer, scratch := filepath.Join(dir, "layer"), filepath.Join(dir, "scratch")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return nil, err
	}
	if err := writeLayer(layer, c.Name, c.Users, c.Files); err != nil {
		return nil, fmt.Errorf("harness: layer of %s: %w", c.Name, err)
	}
	h := &Host{Name: c.Name, t: t, exited: make(chan struct{}), log: filepath.Join(dir, "console.log")}
	procs, err := h.makeCgroups()
	if err != nil {
		h.removeCgroups()
		return nil, err
	}
	spec, err := json.Marshal(guestSpec{Name: c.Name, Scratch: scratch, Layer: layer, Binds: c.Binds, Cgroups: procs, Target: Target})
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	console, err := os.Create(h.log)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	h.cmd = exec.Command(self)
	h.cmd.Env = append(os.Environ(), stageEnv+"=1", specEnv+"="+string(spec))
	h.cmd.Stdout, h.cmd.Stderr = console, console
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := h.cmd.Start(); err != nil {
		h.removeCgroups()
		return nil, fmt.Errorf("harness: start %s: %w", c.Name, err)
	}
	go func() { _ = h.cmd.Wait(); close(h.exited) }()
	t.Cleanup(h.Shutdown)

	timeout := c.BootTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.waitBooted(bctx); err != nil {
		return nil, fmt.Errorf("harness: boot %s: %w\n%s", c.Name, err, h.Console())
	}
	h.booted = true
	return h, nil
}

// waitBooted finds systemd's host PID (the child of unshare) and waits
// until its manager reports the boot done.
func (h *Host) waitBooted(ctx context.Context) error {
	ppid := h.cmd.Process.Pid
	err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		select {
		case <-h.exited:
			return false, errors.New("the guest exited")
		default:
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", ppid, ppid))
		if err != nil {
			return false, nil
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return false, nil
		}
		exe, _ := os.Readlink("/proc/" + f[0] + "/exe")
		if exe != SystemdPath && exe != "/usr"+SystemdPath {
			return false, nil // stage 2 has not exec'd systemd yet
		}
		h.PID, _ = strconv.Atoi(f[0])
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("systemd did not start: %w", err)
	}
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		select {
		case <-h.exited:
			return false, errors.New("the guest exited")
		default:
		}
		out, err := h.Exec(ctx, "systemctl", "is-system-running")
		state := strings.TrimSpace(string(out))
		switch state {
		case "running", "degraded":
			return true, nil
		case "maintenance", "stopping":
			return false, fmt.Errorf("system state %s", state)
		}
		_ = err // offline (no manager to ask yet), initializing, starting: not yet
		return false, nil
	})
}

// Console returns what systemd printed (its log to the console).
func (h *Host) Console() string {
	b, _ := os.ReadFile(h.log)
	return string(b)
}

// Shutdown powers the guest off and waits for systemd to exit (killing it
// after a bound), then removes its cgroups. It is idempotent; Boot
// registers it as a cleanup.
func (h *Host) Shutdown() {
	if h.stopped {
		return
	}
	h.stopped = true
	bound := 20 * time.Second
	if h.booted {
		// SIGRTMIN+4: poweroff; systemd in a container exits at its end.
		_ = syscall.Kill(h.PID, syscall.Signal(34+4))
	} else {
		bound = 0 // PID 1 ignores signals it has no handler for yet
	}
	select {
	case <-h.exited:
	case <-time.After(bound):
		if h.booted {
			h.t.Logf("harness: %s did not power off in %v; killing it", h.Name, bound)
		}
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		if h.PID != 0 {
			_ = syscall.Kill(h.PID, syscall.SIGKILL)
		}
		<-h.exited
	}
	h.removeCgroups()
}

// poll calls cond every interval until it is true, fails, or ctx ends.
func poll(ctx context.Context, every time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
)

// Exec runs a command inside the guest (all its namespaces, its root) and
// returns its combined output.
func (h *Host) Exec(ctx context.Context, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %s: %w", h.Name, quote(args), err)
	}
	return out, nil
}

// Command is the exec.Cmd Exec runs: nsenter into the guest's mount, UTS,
// IPC, network, PID and cgroup namespaces, at its root.
func (h *Host) Command(ctx context.Context, args ...string) *exec.Cmd {
	ns := []string{"--target", strconv.Itoa(h.PID), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--root", "--wd", "--"}
	return exec.CommandContext(ctx, "nsenter", append(ns, args...)...)
}

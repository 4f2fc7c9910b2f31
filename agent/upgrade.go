package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// ErrUpgraded is returned by Run when a generation it applied installs
// another nico-agent than the one running: the service manager starts the
// new one (nico-agent exits 4; the NixOS unit has RestartForceExitStatus=4).
//
// A switch must not restart the agent that runs it (the unit has
// restartIfChanged = false), or the activation's health checks would be
// cut short. So the old agent finishes the activation and its checks, and
// then leaves the generation Applying rather than reporting it: the new
// agent applies it again, which the applier skips (the system already runs
// it), and reports it Applied once its node is back and healthy. The
// coordinator therefore never sees the generation done while the node is
// restarting, and a rollout does not move on to the next node in between.
var ErrUpgraded = errors.New("agent: the applied generation brings a new nico-agent")

// newAgentBinary reads cfg.AgentPathFile, which names the nico-agent of
// the generation the system runs now (the NixOS module writes
// /etc/nico/agent-path), and tells whether it is another file than the
// running executable. Both sides are resolved through symlinks, so the same
// store path reached two ways is no upgrade. A missing or empty file, or an
// executable that cannot be resolved, is no upgrade either: the agent never
// restarts on a guess.
func (a *Agent) newAgentBinary() (string, bool) {
	if a.cfg.AgentPathFile == "" {
		return "", false
	}
	b, err := os.ReadFile(a.cfg.AgentPathFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("cannot read the generation's agent path", "file", a.cfg.AgentPathFile, "err", err)
		}
		return "", false
	}
	want := strings.TrimSpace(string(b))
	if want == "" {
		return "", false
	}
	exe, err := a.Executable()
	if err != nil {
		a.log.Warn("cannot tell which nico-agent is running", "err", err)
		return "", false
	}
	if resolve(want) == resolve(exe) {
		return "", false
	}
	return want, true
}

// resolve is p with its symlinks followed, or p itself when that fails
// (a binary that no longer exists is still compared by its name).
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// upgraded tells, after a generation was applied, whether the agent must
// restart into the nico-agent it installed; it then asks the member controller to end
// Run with ErrUpgraded. An apply the applier skipped (the system already
// ran the generation) never restarts the agent: that is what a restarted
// agent sees, and restarting again would loop.
func (a *Agent) upgraded(log *slog.Logger, skipped bool) bool {
	next, ok := a.newAgentBinary()
	if !ok {
		return false
	}
	exe, _ := a.Executable()
	if skipped {
		log.Warn("the generation installs another nico-agent than the one running, and it was already applied; not restarting again", "running", exe, "installed", next)
		return false
	}
	log.Info("the generation installs another nico-agent; restarting into it, which reports the generation", "running", exe, "next", next)
	a.supervisor.askUpgrade()
	return true
}

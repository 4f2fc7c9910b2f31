package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/controller"
)

// A switch the agent did not start (nixos-rebuild switch by hand) may
// change its configuration or install another nico-agent; the unit has
// restartIfChanged = false so that a switch the agent runs is not cut
// short, so nothing restarts it. The Reloader notices and restarts the
// agent at a safe point instead: it exits as after an upgrade (ErrUpgraded,
// exit 4, RestartForceExitStatus=4), never while a generation is being
// applied (Guard) and only between the agent's own steps (the member
// controller, agent/supervise.go, takes the request between a join, a
// removal or a member restart, never in one).
//
//	[snapshot at start] --every interval--> [compare] --same--> wait
//	                                            |
//	                                            +--changed, and valid--> [wait for an apply to end, hold off the next] --> ErrUpgraded
//	                                            +--changed, not valid--> log once, keep running

// DefaultReloadInterval is how often the Reloader looks for changes.
const DefaultReloadInterval = 5 * time.Second

// ReloadWatch says what a Reloader watches.
type ReloadWatch struct {
	// ConfigFile is the file the agent read its configuration from
	// (--config); "": none. A change of its content restarts the agent.
	ConfigFile string
	// Valid, when set, loads the changed configuration; one it refuses is
	// logged and not acted on, so the agent does not exit into a
	// configuration that would not start.
	Valid func() error
	// AgentPathFile names the nico-agent the running system installed
	// (generations.agentPathFile); "": not watched. When it comes to name
	// another binary than the running one, the agent restarts.
	AgentPathFile string
	// Executable is the running agent's path; os.Executable when nil.
	Executable func() (string, error)
	// RunningExe is the running binary itself; "/proc/self/exe" when "".
	// When the file at Executable's path is no longer it (a package
	// replaced the file in place), the agent restarts.
	RunningExe string
	// Interval between looks; 0: DefaultReloadInterval.
	Interval time.Duration
}

// Reloader restarts the agent at a safe point when its configuration file
// or binary changed after it started.
type Reloader struct {
	w   ReloadWatch
	log *slog.Logger
	sem chan struct{} // held while a generation is applied, and once restarting

	config    [sha256.Size]byte // of ConfigFile at start; zero when unread
	agentPath string            // AgentPathFile's binary at start, resolved
	exe       string            // the running agent's path
	exeSame   bool              // exe was RunningExe at start
	mu        sync.Mutex        // guards rejected: changed runs for two controllers
	rejected  [sha256.Size]byte // the last changed configuration Valid refused
}

// NewReloader takes the snapshot later changes are measured against: make
// it right after the configuration was loaded. It starts nothing.
func NewReloader(w ReloadWatch, log *slog.Logger) *Reloader {
	if w.Executable == nil {
		w.Executable = os.Executable
	}
	if w.RunningExe == "" {
		w.RunningExe = "/proc/self/exe"
	}
	if w.Interval <= 0 {
		w.Interval = DefaultReloadInterval
	}
	r := &Reloader{w: w, log: log.With("component", "reload"), sem: make(chan struct{}, 1)}
	r.config, _ = r.configSum()
	r.agentPath = r.installedAgent()
	if exe, err := w.Executable(); err == nil {
		r.exe = exe
		r.exeSame = r.sameAsRunning()
	}
	return r
}

func (r *Reloader) configSum() ([sha256.Size]byte, bool) {
	if r.w.ConfigFile == "" {
		return [sha256.Size]byte{}, false
	}
	b, err := os.ReadFile(r.w.ConfigFile)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}

// installedAgent is the binary AgentPathFile names, resolved; "" when
// there is none.
func (r *Reloader) installedAgent() string {
	if r.w.AgentPathFile == "" {
		return ""
	}
	b, err := os.ReadFile(r.w.AgentPathFile)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return resolve(strings.TrimSpace(string(b)))
}

// sameAsRunning tells whether the file at the executable's path is the
// running binary.
func (r *Reloader) sameAsRunning() bool {
	running, err := os.Stat(r.w.RunningExe)
	if err != nil {
		return false
	}
	atPath, err := os.Stat(r.exe)
	return err == nil && os.SameFile(running, atPath)
}

// changed says what changed since the snapshot, or "" when nothing did (or
// nothing that is valid).
func (r *Reloader) changed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sum, ok := r.configSum(); ok && sum != r.config && sum != r.rejected {
		if r.w.Valid != nil {
			if err := r.w.Valid(); err != nil {
				r.rejected = sum
				r.log.Error("the configuration file changed, but the new configuration is not valid; the agent keeps running with the old one", "file", r.w.ConfigFile, "err", err)
				return ""
			}
		}
		return "the configuration file " + r.w.ConfigFile + " changed"
	}
	if p := r.installedAgent(); p != r.agentPath && p != "" && r.exe != "" && p != resolve(r.exe) {
		return "the system installs another nico-agent, " + p
	}
	if r.exeSame && !r.sameAsRunning() {
		if _, err := os.Stat(r.exe); err == nil {
			return "the nico-agent binary at " + r.exe + " was replaced"
		}
	}
	return ""
}

// Stale tells whether the running agent is older than what the system
// installs: its configuration file or binary changed since it started (a
// restart into them is due, or already asked for).
func (r *Reloader) Stale() bool { return r.changed() != "" }

// Controller is the controller that looks for changes every interval
// (tick-only: its inputs are files). On one, it waits for a generation
// being applied to finish, holds off the next, and asks a to restart: a's
// Run returns ErrUpgraded at its next safe point (the member controller,
// agent/supervise.go). The agent runs it once ready (Config.Reloader).
func (r *Reloader) Controller(a *Agent) controller.Controller {
	asked := false
	// Waiting for an apply to end may take as long as the apply: that is
	// no stall.
	never := controller.HealthPolicy{StallAfter: -1}
	return &controller.Func{ControllerName: "reload", Resync: r.w.Interval, Policy: never, Do: func(ctx context.Context) error {
		if asked {
			return nil
		}
		why := r.changed()
		if why == "" {
			return nil
		}
		r.log.Info(why+"; restarting the agent into it at the next safe point", "exitCode", 4)
		select {
		case r.sem <- struct{}{}: // held for good: no generation starts any more
		case <-ctx.Done():
			return ctx.Err()
		}
		asked = true
		a.supervisor.askUpgrade()
		return nil
	}}
}

// Guard returns ap, whose generations are not applied while the Reloader
// restarts the agent, nor the agent restarted while one is; nil stays nil.
func (r *Reloader) Guard(ap apply.Applier) apply.Applier {
	if ap == nil {
		return nil
	}
	return guardedApplier{Applier: ap, sem: r.sem}
}

type guardedApplier struct {
	apply.Applier
	sem chan struct{}
}

func (g guardedApplier) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return apply.Result{}, ctx.Err()
	}
	defer func() { <-g.sem }()
	return g.Applier.Apply(ctx, gen)
}

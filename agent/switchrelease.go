package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// DefaultSwitchReleaseResync is how often the switch-release controller
// looks at the running system while its host holds a granted switch.
const DefaultSwitchReleaseResync = 2 * time.Second

// SwitchGuardConfig says how a control-plane agent gives back the switch
// slot its host's pre-switch check took (nico-agent switch-check,
// pkg/switchguard).
type SwitchGuardConfig struct {
	// CurrentSystem is the link to the running generation
	// ("/run/current-system" when empty).
	CurrentSystem string
	// Stale, when set, tells whether the agent still runs an older
	// configuration or binary than the system installs (a Reloader's
	// Pending): the switch is not over until the agent restarted into the
	// new generation, since that restart restarts the member.
	Stale func() bool
	// Resync is the controller's tick; 0: DefaultSwitchReleaseResync.
	Resync time.Duration
}

// The switch-release controller ends its host's switch: once a granted
// request's generation is the running one, the agent runs that
// generation's configuration and binary (it restarted into them when they
// changed, which restarts the member) and the member serves, healthy, it
// records SwitchedAt in the request's spec, and the leader frees the slot.
// A switch that fails or never happens is not reported: the leader takes
// the slot back at the request's hold.
//
//	granted, not switched --tick/watch--> current-system == toplevel?
//	                                        && agent not stale && healthy --> spec.switchedAt = now
func (a *Agent) switchRelease() controller.Controller {
	if !a.controlPlane() {
		return nil
	}
	cfg := a.cfg.SwitchGuard
	if cfg.CurrentSystem == "" {
		cfg.CurrentSystem = "/run/current-system"
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultSwitchReleaseResync
	}
	key := store.SwitchKey(a.cfg.Name)
	return &controller.Func{ControllerName: "switch-release", Prefixes: []string{key}, Resync: cfg.Resync, Do: func(ctx context.Context) error {
		r := &api.SwitchRequest{}
		err := a.store().Get(ctx, key, r)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("agent: read switch request: %w", err)
		}
		if !r.Answered() || r.Status.Phase != api.SwitchGranted || !r.Spec.SwitchedAt.IsZero() {
			return nil
		}
		if why := a.switchPending(cfg, r.Spec.Toplevel); why != "" {
			a.log.Debug("switch not over yet", "toplevel", r.Spec.Toplevel, "why", why)
			return nil
		}
		r.Spec.SwitchedAt = a.cfg.Clock.Now()
		err = a.store().Update(ctx, key, r)
		if errors.Is(err, store.ErrConflict) {
			return nil // changed meanwhile: the watch brings it again
		}
		if err != nil {
			return fmt.Errorf("agent: report the switch to %s: %w", r.Spec.Toplevel, err)
		}
		a.log.Info("switched; member healthy on the new generation: the switch slot goes back", "toplevel", r.Spec.Toplevel, "op", r.Status.Operation)
		return nil
	}}
}

// switchPending says why the switch to toplevel is not over, or "".
func (a *Agent) switchPending(cfg SwitchGuardConfig, toplevel string) string {
	cur, err := filepath.EvalSymlinks(cfg.CurrentSystem)
	if err != nil {
		return err.Error()
	}
	want, err := filepath.EvalSymlinks(toplevel)
	if err != nil {
		want = toplevel
	}
	switch {
	case cur != want:
		return cfg.CurrentSystem + " is " + cur
	case cfg.Stale != nil && cfg.Stale():
		return "the agent restarts into the new generation first"
	case !a.Healthy():
		return "the member is not healthy"
	}
	return ""
}

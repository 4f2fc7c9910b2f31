package member

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// errStopAsked ends a Systemd start that Stop cut short.
var errStopAsked = errors.New("stop asked")

// startServing starts the unit (restarts it when running) and waits until
// the member serves. With detect set it also watches for a lost publish
// (lost_publish.go), from the start job on: a Type=notify unit's start job
// completes only once etcd is ready, which a lost publish holds back by
// etcd's request timeout. It returns errLostPublish on one.
func (s *Systemd) startServing(ctx context.Context, cfg Config, run *systemdRun, running, detect bool) error {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-run.stopping:
			cancel(errStopAsked)
		case <-pctx.Done():
		}
	}()
	if detect {
		tlsCfg, err := cfg.clientTLS()
		if err != nil {
			return err
		}
		stop, err := watchLostPublish(pctx, cancel, cfg, tlsCfg)
		if err != nil {
			return err
		}
		defer stop()
	}
	var err error
	if running {
		err = s.units.RestartUnit(pctx, s.unit)
	} else {
		err = s.units.StartUnit(pctx, s.unit)
	}
	if err == nil {
		err = s.waitServing(pctx, cfg)
	}
	if err == nil {
		return nil
	}
	switch cause := context.Cause(pctx); {
	case errors.Is(cause, errLostPublish):
		return errLostPublish
	case errors.Is(cause, errStopAsked):
		return fmt.Errorf("stopped before serving %s", cfg.ClientURL)
	}
	return err
}

// restartLost ends a member that lost its publish and starts it again,
// with no watch for another loss. The start job the loss held back is
// still pending: SIGKILL to etcd fails it (etcd's SIGTERM handler would
// wait out the publish), and the next start waits until the unit has
// exited, since a start queued beside a pending one merges with it.
func (s *Systemd) restartLost(ctx context.Context, cfg Config, run *systemdRun) error {
	if err := s.units.KillUnit(ctx, s.unit, syscall.SIGKILL); err != nil {
		// It may have exited by itself in between.
		if st, serr := s.units.UnitState(ctx, s.unit); serr != nil || !st.Exited() {
			return fmt.Errorf("end %s after a lost publish: %w", s.unit, err)
		}
	}
	if err := s.waitExited(ctx, run); err != nil {
		return err
	}
	if isClosed(run.stopping) {
		return fmt.Errorf("stopped before serving %s", cfg.ClientURL)
	}
	return s.startServing(ctx, cfg, run, false, false)
}

// waitExited polls the unit's state until it has exited (or waits for
// systemd's own restart, for a unit with Restart=), Stop is asked, or ctx
// ends.
func (s *Systemd) waitExited(ctx context.Context, run *systemdRun) error {
	t := time.NewTicker(lostPublishEvery)
	defer t.Stop()
	for {
		st, err := s.units.UnitState(ctx, s.unit)
		if err == nil && (st.Exited() || st.Sub == "auto-restart") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to exit after SIGKILL (%s): %w", s.unit, st, ctx.Err())
		case <-run.stopping:
			return nil
		case <-t.C:
		}
	}
}

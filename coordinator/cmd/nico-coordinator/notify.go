package main

import (
	"context"
	"log/slog"

	"github.com/homystack/nico/pkg/sdnotify"
)

// candidate is what systemd is told about: *coordinator.Coordinator.
type candidate interface {
	Campaigning() <-chan struct{}
	Healthy() bool
}

// notifySystemd keeps systemd told about the candidate (the unit is
// Type=notify with WatchdogSec=): READY=1 once it campaigns, WATCHDOG=1 at
// half the watchdog interval while it is healthy, STOPPING=1 when ctx ends.
// The returned function ends it as ctx would and waits.
func notifySystemd(ctx context.Context, n *sdnotify.Notifier, c candidate, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
		case <-c.Campaigning():
			if err := n.Ready(); err != nil {
				log.Warn("cannot tell systemd the coordinator is ready", "err", err)
			}
			_ = n.Status("campaigning for leadership")
			if err := n.RunWatchdog(ctx, c.Healthy); err != nil {
				log.Warn("watchdog not fed", "err", err)
				<-ctx.Done()
			}
		}
		_ = n.Stopping()
	}()
	return func() { cancel(); <-done }
}

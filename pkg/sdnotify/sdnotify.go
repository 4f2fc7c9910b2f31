// Package sdnotify tells systemd about a service's state (READY, STATUS,
// STOPPING), asks it for more time to start (EXTEND_TIMEOUT_USEC) and
// keeps its watchdog fed while the service is healthy. Outside systemd,
// with NOTIFY_SOCKET unset, every call is a cheap no-op.
package sdnotify

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends sd_notify(3) messages to the socket systemd named in
// NOTIFY_SOCKET when the Notifier was made. The zero value and a nil
// *Notifier send nothing.
type Notifier struct {
	enabled bool
}

// New returns a Notifier for the current process. It only reads the
// environment; it opens nothing and starts no goroutine.
func New() *Notifier {
	return &Notifier{enabled: os.Getenv("NOTIFY_SOCKET") != ""}
}

// Enabled reports whether the process runs under a notify socket.
func (n *Notifier) Enabled() bool { return n != nil && n.enabled }

// Ready tells systemd that start-up is finished (READY=1).
func (n *Notifier) Ready() error { return n.notify(daemon.SdNotifyReady) }

// Stopping tells systemd that the service is shutting down (STOPPING=1).
func (n *Notifier) Stopping() error { return n.notify(daemon.SdNotifyStopping) }

// Watchdog feeds the service watchdog once (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.notify(daemon.SdNotifyWatchdog) }

// ExtendTimeout asks systemd for d more time in the current state
// (EXTEND_TIMEOUT_USEC=d in microseconds): past TimeoutStartSec=, a start
// that keeps sending it within each d goes on; one that stops is timed out
// d after its last message. d is rounded up to a whole microsecond, at
// least one.
func (n *Notifier) ExtendTimeout(d time.Duration) error {
	usec := max((d+time.Microsecond-1)/time.Microsecond, 1)
	return n.notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", int64(usec)))
}

// Status sets the one-line status shown by systemctl status (STATUS=msg).
// Line breaks in msg become spaces, so msg cannot smuggle in other
// assignments.
func (n *Notifier) Status(msg string) error {
	msg = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg)
	return n.notify("STATUS=" + msg)
}

func (n *Notifier) notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("sdnotify: send %q: %w", state, err)
	}
	return nil
}

// WatchdogInterval returns the watchdog timeout systemd set for this process
// (WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process) and
// whether the watchdog is on. It is off when there is no notify socket to
// feed it through, or when the variables are malformed.
func (n *Notifier) WatchdogInterval() (time.Duration, bool) {
	if !n.Enabled() {
		return 0, false
	}
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// RunWatchdog feeds the watchdog at half its interval, each time only if
// healthy() returns true, so that systemd restarts a service that stops
// being healthy. It checks once at start, blocks until ctx ends and then
// returns nil. When the watchdog is off it just waits for ctx. A failed send
// is returned wrapped; the caller decides whether to run it again.
func (n *Notifier) RunWatchdog(ctx context.Context, healthy func() bool) error {
	interval, ok := n.WatchdogInterval()
	if !ok {
		<-ctx.Done()
		return nil
	}
	feed := func() error {
		if !healthy() {
			return nil
		}
		return n.Watchdog()
	}
	if err := feed(); err != nil {
		return err
	}
	ticker := time.NewTicker(max(interval/2, time.Microsecond))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := feed(); err != nil {
				return err
			}
		}
	}
}

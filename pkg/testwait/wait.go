// Package testwait waits in tests for a condition instead of sleeping: it
// re-checks the condition on a ticker until the condition holds, a
// deadline passes or the test's context ends, and a failure reports the
// condition's last reason. Key waits on an etcd watch of one key instead
// of polling, for conditions on a stored object's state.
package testwait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// ErrDeadline is returned by Until when the deadline passed before the
// condition held; the error wraps it with the condition's last reason.
var ErrDeadline = errors.New("testwait: condition did not hold before the deadline")

// Interval is how often For and True re-check their condition.
const Interval = 10 * time.Millisecond

// Cond reports whether the awaited condition holds and, when it does not,
// why not (what a failure reports).
type Cond func() (ok bool, why string)

// Until checks cond at once and then on every tick of clock's ticker of
// period interval, until cond holds (nil), within has passed on clock (an
// error wrapping ErrDeadline with cond's last reason) or ctx ends (an error
// wrapping ctx's error with the last reason). It never calls cond after it
// returned.
func Until(ctx context.Context, clock clockwork.Clock, within, interval time.Duration, cond Cond) error {
	if interval <= 0 {
		return fmt.Errorf("testwait: interval %s: must be positive", interval)
	}
	ok, why := cond()
	if ok {
		return nil
	}
	deadline := clock.NewTimer(within)
	defer deadline.Stop()
	tick := clock.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("testwait: %w; last: %s", ctx.Err(), why)
		case <-deadline.Chan():
			return fmt.Errorf("%w (%s); last: %s", ErrDeadline, within, why)
		case <-tick.Chan():
			if ok, why = cond(); ok {
				return nil
			}
		}
	}
}

// For fails t with what and cond's last reason unless cond holds within
// the duration (re-checked every Interval on the real clock) and before
// t's context ends. t's context has ended by the time t's Cleanup
// functions run: there, call Until with a context of their own.
func For(t testing.TB, within time.Duration, what string, cond Cond) {
	t.Helper()
	if err := Until(t.Context(), clockwork.NewRealClock(), within, Interval, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// True is For for a condition without a reason of its own.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, within, what, func() (bool, string) { return cond(), "not yet" })
}

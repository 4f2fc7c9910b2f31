package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// TestIdentityTriedUntilDone: a failed attempt at the rest of the node's
// identity (a leader change during its auth changes) is tried again, not
// returned: returned, it stopped the agent and with it a voter's member,
// which cost a two-voter cluster its quorum (a fresh make test's
// TestExternalMember hung on it).
func TestIdentityTriedUntilDone(t *testing.T) {
	quick := func() backoff.BackOff { return &backoff.ConstantBackOff{Interval: time.Millisecond} }
	calls, logged := 0, 0
	err := untilDone(t.Context(), quick(), func(error, time.Duration) { logged++ }, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("etcdserver: leader changed")
		}
		return nil
	})
	if err != nil || calls != 3 || logged != 2 {
		t.Fatalf("untilDone: %v after %d calls, %d logged; want nil after 3, 2 logged", err, calls, logged)
	}

	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	err = untilDone(ctx, quick(), func(error, time.Duration) {}, func(context.Context) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return errors.New("etcdserver: request timed out")
	})
	if !errors.Is(err, context.Canceled) || calls != 2 {
		t.Fatalf("untilDone after cancel: %v after %d calls; want context.Canceled after 2", err, calls)
	}
}

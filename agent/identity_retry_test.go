package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// TestIdentityAtBringUpTriedOnTransientErrors: the identity a control-plane
// machine makes at bring-up is tried again after an etcd timeout (it
// stopped the agent: "rbac: auth status: request timed out"), and not after
// an error that will not pass, which ends the bring-up at once.
func TestIdentityAtBringUpTriedOnTransientErrors(t *testing.T) {
	quick := func() backoff.BackOff { return &backoff.ConstantBackOff{Interval: time.Millisecond} }
	calls := 0
	err := untilDone(t.Context(), quick(), func(error, time.Duration) {}, transientOnly(func(context.Context) error {
		calls++
		if calls < 3 {
			return fmt.Errorf("agent: etcd identity: rbac: auth status: %w", rpctypes.ErrTimeout)
		}
		return nil
	}))
	if err != nil || calls != 3 {
		t.Fatalf("after timeouts: %v after %d calls; want nil after 3", err, calls)
	}

	calls = 0
	refused := fmt.Errorf("agent: etcd identity: %w", rpctypes.ErrPermissionDenied)
	err = untilDone(t.Context(), quick(), func(error, time.Duration) {}, transientOnly(func(context.Context) error {
		calls++
		return refused
	}))
	if err != refused || calls != 1 {
		t.Fatalf("after a refusal: %v after %d calls; want the refusal itself after 1", err, calls)
	}
}

package etcdadmin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// upperHalf is a doubling backoff from base to max whose every delay d is
// drawn evenly from its upper half, (d/2, d]: cenkalti/backoff spreads an
// interval of 3d/4 by a third either way.
func upperHalf(base, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: base * 3 / 4, RandomizationFactor: 1.0 / 3, Multiplier: 2, MaxInterval: max * 3 / 4}
}

// defaultRetry is the backoff of retryable membership errors: 100 ms
// doubling to 2 s, jittered.
func defaultRetry() backoff.BackOff { return upperHalf(100*time.Millisecond, 2*time.Second) }

// retry calls op until it succeeds, fails with an error Retryable rejects
// (returned as it is), or ctx ends: then the error wraps both ctx's error
// and op's last one (the last not cut short by ctx's end), so errors.Is
// finds either.
func (a *Admin) retry(ctx context.Context, op func(context.Context) error) error {
	return a.retryWith(ctx, a.newRetry(), op)
}

// AddEvery is how often AddLearner asks again while etcd refuses the
// learner for a passing reason. The common one is etcd's rule that the
// leader be connected to a quorum of voters for 5 s (HealthInterval)
// before a member is added: right after a promotion it refuses for up to
// 5 s, and a backoff grown to 2 s by then would add up to 2 s more.
const AddEvery = 50 * time.Millisecond

// retryWith is retry on backoff b.
func (a *Admin) retryWith(ctx context.Context, b backoff.BackOff, op func(context.Context) error) error {
	var last error
	attempts, permanent := 0, false
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempts++
		err := op(ctx)
		if err != nil && !Retryable(err) {
			permanent, last = true, err
			return struct{}{}, backoff.Permanent(err)
		}
		// An attempt cut short by ctx's end says only that: keep the
		// error of the one before (why etcd kept refusing), if any.
		if last == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			last = err
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0))
	if err != nil && !permanent {
		// With no limit on time or tries, Retry stops only when ctx
		// ends, and returns ctx's cause alone.
		return fmt.Errorf("etcdadmin: gave up after %d attempts: %w: %w", attempts, err, last)
	}
	return err
}

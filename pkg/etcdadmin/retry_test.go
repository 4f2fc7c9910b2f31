package etcdadmin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestUpperHalf: the k-th delay of upperHalf(base, max) lies in (d/2, d]
// for d = min(base*2^k, max), as pkg/backoff's {Factor: 2, Jitter: 0.5}
// drew it, and the draws spread over that range.
func TestUpperHalf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		b         backoff.BackOff
		base, max time.Duration
	}{
		{"membership retry", defaultRetry(), 100 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const slack = time.Microsecond // float rounding
			lo, hi := map[int]time.Duration{}, map[int]time.Duration{}
			for round := 0; round < 300; round++ {
				tc.b.Reset()
				d := tc.base
				for k := 0; k < 8; k++ {
					got := tc.b.NextBackOff()
					if got < d/2-slack || got > d+slack {
						t.Fatalf("delay %d = %v, want in (%v, %v]", k, got, d/2, d)
					}
					if lo[k] == 0 || got < lo[k] {
						lo[k] = got
					}
					hi[k] = max(hi[k], got)
					d = min(2*d, tc.max)
				}
			}
			d := tc.base
			for k := 0; k < 8; k++ {
				if lo[k] > d*6/10 || hi[k] < d*9/10 {
					t.Errorf("delay %d ranged over [%v, %v] only, want most of (%v, %v]", k, lo[k], hi[k], d/2, d)
				}
				d = min(2*d, tc.max)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	a := &Admin{newRetry: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}
	t.Run("retryable errors are retried", func(t *testing.T) {
		n := 0
		err := a.retry(context.Background(), func(context.Context) error {
			if n++; n < 3 {
				return rpctypes.ErrUnhealthy
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("err %v after %d attempts; want nil after 3", err, n)
		}
	})
	t.Run("others are returned as they are", func(t *testing.T) {
		n := 0
		err := a.retry(context.Background(), func(context.Context) error { n++; return rpctypes.ErrPeerURLExist })
		if err != rpctypes.ErrPeerURLExist || n != 1 {
			t.Fatalf("err %v after %d attempts; want ErrPeerURLExist after 1", err, n)
		}
	})
	t.Run("an ended context wraps both errors", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err := a.retry(ctx, func(context.Context) error {
			if n++; n == 2 {
				cancel()
			}
			return rpctypes.ErrUnhealthy
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, rpctypes.ErrUnhealthy) || n != 2 {
			t.Fatalf("err %v after %d attempts; want one wrapping Canceled and ErrUnhealthy after 2", err, n)
		}
	})
	t.Run("an attempt cut short by the end keeps the refusal before it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		n := 0
		err := a.retry(ctx, func(ctx context.Context) error {
			if n++; n < 3 {
				return rpctypes.ErrTooManyLearners
			}
			<-ctx.Done() // the deadline passes while etcd is asked a third time
			return fmt.Errorf("member add: %w", ctx.Err())
		})
		if !errors.Is(err, rpctypes.ErrTooManyLearners) || !errors.Is(err, context.DeadlineExceeded) || n != 3 {
			t.Fatalf("err %v after %d attempts; want one wrapping DeadlineExceeded and ErrTooManyLearners after 3", err, n)
		}
	})
}

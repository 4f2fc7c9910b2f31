// Package backoff computes jittered exponential delays and retries an
// operation with them, waiting on a context rather than sleeping.
package backoff

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff describes a jittered exponential backoff. The zero value retries
// at once; set Base and Max for anything useful.
//
// The un-jittered delay of attempt n (counted from 0) is Base*Factor^n,
// capped at Max. Jitter then subtracts a random share of it:
//
//	delay = d * (1 - Jitter*r),  r = Rand() in [0, 1)
//
// so Jitter 0 is no jitter, 0.5 is "equal jitter" (a delay in (d/2, d]) and
// 1 is "full jitter" (a delay in (0, d]). A delay never exceeds Max and is
// never negative.
type Backoff struct {
	// Base is the delay of the first attempt; zero or negative means 0.
	Base time.Duration
	// Max caps every delay; zero or negative means no cap besides the
	// range of time.Duration.
	Max time.Duration
	// Factor is the growth per attempt; a value below 1 means 2.
	Factor float64
	// Jitter is the share of the delay that is random, clamped to [0, 1].
	Jitter float64
	// Rand returns a number in [0, 1); nil means math/rand/v2.Float64.
	// Out-of-range results are clamped.
	Rand func() float64
}

// Delay returns the delay before retrying after attempt (0 for the delay
// after the first failure). It is a pure function of b and attempt, apart
// from b.Rand.
func (b Backoff) Delay(attempt int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	if attempt < 0 {
		attempt = 0
	}
	factor := b.Factor
	if factor < 1 {
		factor = 2
	}
	limit := float64(math.MaxInt64)
	if b.Max > 0 {
		limit = float64(b.Max)
	}
	d := float64(b.Base) * math.Pow(factor, float64(attempt))
	if math.IsNaN(d) || d > limit {
		d = limit
	}
	jitter := clamp(b.Jitter, 0, 1)
	if jitter > 0 {
		rnd := rand.Float64
		if b.Rand != nil {
			rnd = b.Rand
		}
		d *= 1 - jitter*clamp(rnd(), 0, 1)
	}
	// Converting a float64 at or above 2^63 to int64 is undefined: the
	// largest float64 below it is the ceiling.
	if d >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

func clamp(x, lo, hi float64) float64 {
	switch {
	case math.IsNaN(x), x < lo:
		return lo
	case x > hi:
		return hi
	}
	return x
}

// Retry calls op until it succeeds, returns an error that retryable rejects,
// or ctx ends. Between attempts it waits b.Delay(attempt) on a timer, so a
// cancelled ctx stops the wait at once. A nil retryable retries every error.
//
// A non-retryable error is returned as it is. When ctx ends, the error names
// the number of attempts and wraps both ctx.Err() and op's last error, so
// errors.Is works for either.
func Retry(ctx context.Context, b Backoff, retryable func(error) bool, op func(ctx context.Context) error) error {
	var last error
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			if last == nil {
				return fmt.Errorf("backoff: gave up before the first attempt: %w", err)
			}
			return fmt.Errorf("backoff: gave up after %d attempts: %w: %w", attempt, err, last)
		}
		last = op(ctx)
		if last == nil {
			return nil
		}
		if retryable != nil && !retryable(last) {
			return last
		}
		timer := time.NewTimer(b.Delay(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("backoff: gave up after %d attempts: %w: %w", attempt+1, ctx.Err(), last)
		case <-timer.C:
		}
	}
}

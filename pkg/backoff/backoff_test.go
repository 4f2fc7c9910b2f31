package backoff

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func constRand(r float64) func() float64 { return func() float64 { return r } }

func TestDelay(t *testing.T) {
	tests := []struct {
		name    string
		b       Backoff
		attempt int
		want    time.Duration
	}{
		{"zero value", Backoff{}, 3, 0},
		{"first attempt is base", Backoff{Base: time.Second, Max: time.Minute}, 0, time.Second},
		{"negative attempt is first", Backoff{Base: time.Second, Max: time.Minute}, -5, time.Second},
		{"doubles by default", Backoff{Base: time.Second, Max: time.Minute}, 3, 8 * time.Second},
		{"factor 3", Backoff{Base: time.Second, Max: time.Minute, Factor: 3}, 2, 9 * time.Second},
		{"factor 1 is constant", Backoff{Base: time.Second, Max: time.Minute, Factor: 1}, 10, time.Second},
		{"capped at max", Backoff{Base: time.Second, Max: 10 * time.Second}, 5, 10 * time.Second},
		{"huge attempt capped", Backoff{Base: time.Second, Max: 10 * time.Second}, 1 << 30, 10 * time.Second},
		{"no max saturates", Backoff{Base: time.Second}, 1 << 30, time.Duration(math.MaxInt64)},
		{"max below base", Backoff{Base: time.Minute, Max: time.Second}, 0, time.Second},
		{"full jitter r=0 keeps delay", Backoff{Base: time.Second, Max: time.Minute, Jitter: 1, Rand: constRand(0)}, 1, 2 * time.Second},
		{"full jitter r=0.5 halves", Backoff{Base: time.Second, Max: time.Minute, Jitter: 1, Rand: constRand(0.5)}, 1, time.Second},
		{"full jitter r=0.75 at max", Backoff{Base: time.Second, Max: 4 * time.Second, Jitter: 1, Rand: constRand(0.75)}, 9, time.Second},
		{"equal jitter r=0.5", Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.5, Rand: constRand(0.5)}, 2, 3 * time.Second},
		{"equal jitter r=1 is half", Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.5, Rand: constRand(1)}, 2, 2 * time.Second},
		{"jitter above 1 clamped", Backoff{Base: time.Second, Max: time.Minute, Jitter: 7, Rand: constRand(0.5)}, 0, 500 * time.Millisecond},
		{"negative jitter is none", Backoff{Base: time.Second, Max: time.Minute, Jitter: -1, Rand: constRand(0.5)}, 0, time.Second},
		{"rand above 1 never negative", Backoff{Base: time.Second, Max: time.Minute, Jitter: 1, Rand: constRand(3)}, 0, 0},
		{"rand below 0 never above max", Backoff{Base: time.Second, Max: time.Second, Jitter: 1, Rand: constRand(-3)}, 4, time.Second},
		{"rand NaN", Backoff{Base: time.Second, Max: time.Minute, Jitter: 1, Rand: constRand(math.NaN())}, 0, time.Second},
		{"negative base", Backoff{Base: -time.Second, Max: time.Minute}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestDelayBounds(t *testing.T) {
	b := Backoff{Base: 3 * time.Millisecond, Max: 7 * time.Second, Factor: 1.7, Jitter: 1}
	for attempt := range 200 {
		d := b.Delay(attempt)
		if d < 0 || d > b.Max {
			t.Fatalf("Delay(%d) = %v, outside [0, %v]", attempt, d, b.Max)
		}
	}
}

var errTransient = errors.New("transient")
var errFatal = errors.New("fatal")

func isTransient(err error) bool { return errors.Is(err, errTransient) }

func TestRetry(t *testing.T) {
	tests := []struct {
		name      string
		results   []error // op's result per call; the last one repeats
		retryable func(error) bool
		wantCalls int
		wantErr   error
	}{
		{"success at once", []error{nil}, isTransient, 1, nil},
		{"success after transient errors", []error{errTransient, errTransient, errTransient, nil}, isTransient, 4, nil},
		{"non-retryable at once", []error{errFatal}, isTransient, 1, errFatal},
		{"non-retryable after transient", []error{errTransient, errFatal}, isTransient, 2, errFatal},
		{"nil retryable retries all", []error{errFatal, errFatal, nil}, nil, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Retry(t.Context(), Backoff{}, tt.retryable, func(context.Context) error {
				r := tt.results[min(calls, len(tt.results)-1)]
				calls++
				return r
			})
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if err != tt.wantErr {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls := 0
	// The first wait is a nanosecond, the second an hour: only the
	// cancellation can end it.
	b := Backoff{Base: time.Nanosecond, Max: time.Hour, Factor: 1e15}
	err := Retry(ctx, b, isTransient, func(context.Context) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return errTransient
	})
	if calls != 2 {
		t.Errorf("calls = %d, want 2", calls)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) {
		t.Errorf("err = %v, want it to wrap context.Canceled and the last error", err)
	}
	if !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("err = %q, want the attempt count", err)
	}
}

func TestRetryDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Retry(ctx, Backoff{}, nil, func(context.Context) error {
		t.Fatal("op called with a done context")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

package testwait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// counting is a condition that holds from its nth call on and reports its
// call count as its reason.
func counting(n int64, calls *atomic.Int64) Cond {
	return func() (bool, string) {
		c := calls.Add(1)
		return n > 0 && c >= n, fmt.Sprintf("call %d", c)
	}
}

// start runs Until on a fake clock and returns the clock and the result;
// it returns once Until waits on its timer and ticker.
func start(t *testing.T, ctx context.Context, within, interval time.Duration, cond Cond) (*clockwork.FakeClock, <-chan error) {
	t.Helper()
	fc := clockwork.NewFakeClock()
	res := make(chan error, 1)
	go func() { res <- Until(ctx, fc, within, interval, cond) }()
	if err := fc.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	return fc, res
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int64
	called := make(chan struct{}, 3)
	cond := counting(3, &calls)
	fc, res := start(t, t.Context(), time.Minute, time.Second, func() (bool, string) {
		defer func() { called <- struct{}{} }()
		return cond()
	})
	<-called // the first check, before any tick
	for range 2 {
		fc.Advance(time.Second)
		<-called
	}
	if err := <-res; err != nil {
		t.Fatalf("Until = %v, want nil", err)
	}
	if got := calls.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3", got)
	}
}

func TestUntilHoldingAtOnceStartsNoTimer(t *testing.T) {
	fc := clockwork.NewFakeClock()
	if err := Until(t.Context(), fc, time.Minute, time.Second, func() (bool, string) { return true, "" }); err != nil {
		t.Fatal(err)
	}
}

// TestUntilStopsAtTheDeadline: at the deadline Until fails with the last
// reason and calls the condition no more.
func TestUntilStopsAtTheDeadline(t *testing.T) {
	var calls atomic.Int64
	fc, res := start(t, t.Context(), 10*time.Second, time.Second, counting(0, &calls))
	fc.Advance(10 * time.Second)
	var err error
	select {
	case err = <-res:
	case <-time.After(30 * time.Second):
		t.Fatal("Until did not return at the deadline")
	}
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("Until = %v, want ErrDeadline", err)
	}
	after := calls.Load()
	if want := fmt.Sprintf("last: call %d", after); !strings.Contains(err.Error(), want) {
		t.Fatalf("Until = %q, want the last reason %q", err, want)
	}
	fc.Advance(time.Minute)
	if got := calls.Load(); got != after {
		t.Fatalf("cond called %d times after Until returned", got-after)
	}
}

func TestUntilEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int64
	_, res := start(t, ctx, time.Minute, time.Second, counting(0, &calls))
	cancel()
	err := <-res
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "last: call 1") {
		t.Fatalf("Until = %v, want context.Canceled with the last reason", err)
	}
}

func TestUntilRejectsANonPositiveInterval(t *testing.T) {
	err := Until(t.Context(), clockwork.NewFakeClock(), time.Second, 0, func() (bool, string) { return false, "" })
	if err == nil || !strings.Contains(err.Error(), "interval 0s: must be positive") {
		t.Fatalf("Until with interval 0 = %v", err)
	}
}

// fatalTB records a Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestForFailsWithWhatAndTheReason(t *testing.T) {
	f := &fatalTB{TB: t}
	start := time.Now()
	For(f, 50*time.Millisecond, "the answer", func() (bool, string) { return false, "still 41" })
	if !strings.Contains(f.msg, "waiting for the answer") || !strings.Contains(f.msg, "last: still 41") || !strings.Contains(f.msg, ErrDeadline.Error()) {
		t.Fatalf("For failed with %q", f.msg)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("For returned after %s, its deadline was 50ms", d)
	}
	f.msg = ""
	n := 0
	True(f, 10*time.Second, "three calls", func() bool { n++; return n == 3 })
	if f.msg != "" || n != 3 {
		t.Fatalf("True: %q after %d calls", f.msg, n)
	}
}

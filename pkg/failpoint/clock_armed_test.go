//go:build failpoints

package failpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestSteppedClockFollowsItsFile: Now is the underlying clock plus the
// file's offset, read again once ClockReread has passed; a file that does
// not parse keeps the last offset, no file is no offset; timers are the
// underlying clock's.
func TestSteppedClockFollowsItsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clock")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fake := clockwork.NewFakeClock()
	c := &steppedClock{Clock: fake, file: file}
	offset := func() time.Duration { return c.Now().Sub(fake.Now()) }
	write("2h\n")
	if got := offset(); got != 2*time.Hour {
		t.Fatalf("offset %s, want 2h", got)
	}
	if got := c.Since(fake.Now()); got != 2*time.Hour {
		t.Errorf("Since(now) = %s, want 2h", got)
	}
	if got := c.Until(fake.Now()); got != -2*time.Hour {
		t.Errorf("Until(now) = %s, want -2h", got)
	}
	write("-30m")
	if got := offset(); got != 2*time.Hour {
		t.Errorf("before ClockReread passed: offset %s, want 2h still", got)
	}
	fake.Advance(ClockReread)
	if got := offset(); got != -30*time.Minute {
		t.Errorf("after ClockReread: offset %s, want -30m", got)
	}
	write("soon")
	fake.Advance(ClockReread)
	if got := offset(); got != -30*time.Minute {
		t.Errorf("a file that does not parse: offset %s, want the last one, -30m", got)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	fake.Advance(ClockReread)
	if got := offset(); got != 0 {
		t.Errorf("no file: offset %s, want 0", got)
	}
	write("1h")
	fake.Advance(ClockReread)
	timer := c.NewTimer(time.Minute)
	fake.Advance(time.Minute)
	select {
	case <-timer.Chan():
	default:
		t.Error("a 1 min timer did not fire after 1 min of the underlying clock")
	}
}

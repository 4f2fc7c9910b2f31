//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

func init() {
	file := os.Getenv(EnvClockFile)
	if file == "" {
		return
	}
	Clock = func(c clockwork.Clock) clockwork.Clock { return &steppedClock{Clock: c, file: file} }
}

// steppedClock is a clock whose Now is offset by the duration in file.
type steppedClock struct {
	clockwork.Clock
	file string

	mu     sync.Mutex
	offset time.Duration
	readAt time.Time // real time of the last read
}

func (c *steppedClock) Now() time.Time {
	now := c.Clock.Now()
	return now.Add(c.offsetAt(now))
}

func (c *steppedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *steppedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// offsetAt returns the file's offset, read again when the last read is
// older than ClockReread. A file that does not parse keeps the offset it
// had (and says so on stderr).
func (c *steppedClock) offsetAt(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < ClockReread {
		return c.offset
	}
	c.readAt = now
	b, err := os.ReadFile(c.file)
	if err != nil {
		c.offset = 0
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		c.offset = 0
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failpoint clock: %s: %q: want a duration such as -2h: %v\n", c.file, s, err)
		return c.offset
	}
	if d != c.offset {
		fmt.Fprintf(os.Stderr, "failpoint clock: stepped to %s\n", d)
	}
	c.offset = d
	return d
}

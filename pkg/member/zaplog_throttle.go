package member

import (
	"sync"
	"time"
)

// warnEvery is how often one etcd warning may reach slog. etcd repeats
// some in a loop with no pause: a member that got its log as a snapshot
// logs "failed to publish local member to cluster through raft" ("too many
// requests") thousands of times a second until an entry after the snapshot
// is applied (docs/etcd-snapshot-join.md).
const warnEvery = time.Second

// logThrottle lets each message through at most once per warnEvery and
// counts the ones it held back. It is shared by a core and its With copies.
type logThrottle struct {
	mu   sync.Mutex
	seen map[string]*throttled
}

type throttled struct {
	last       time.Time
	suppressed int
}

func newLogThrottle() *logThrottle { return &logThrottle{seen: map[string]*throttled{}} }

// allow tells whether msg, logged at now, goes through, and how many of it
// were held back since the last one that did.
func (t *logThrottle) allow(msg string, now time.Time) (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.seen[msg]
	if s == nil {
		if len(t.seen) >= 256 {
			clear(t.seen) // bound the memory: etcd's messages are few
		}
		t.seen[msg] = &throttled{last: now}
		return true, 0
	}
	if now.Sub(s.last) < warnEvery {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	return true, n
}

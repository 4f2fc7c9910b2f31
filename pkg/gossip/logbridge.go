package gossip

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// rejectLogInterval is how often a rejected sender is logged again.
const rejectLogInterval = 10 * time.Minute

// logBridge turns memberlist's log lines ("[ERR] memberlist: ...") into
// slog records. Messages no installed key decrypts are reported once per
// sender and rejectLogInterval, with what to check, never in a loop.
type logBridge struct {
	log       *slog.Logger
	now       func() time.Time
	onSuspect func(name string) // may be nil

	mu       sync.Mutex
	rejected map[string]time.Time // sender -> when last logged
	count    map[string]int       // sender -> rejections since
}

func newLogBridge(log *slog.Logger, now func() time.Time) *logBridge {
	return &logBridge{log: log, now: now, rejected: map[string]time.Time{}, count: map[string]int{}}
}

var (
	fromRE    = regexp.MustCompile(`from=([^ ]+)`)
	suspectRE = regexp.MustCompile(`^Suspect (\S+) has failed`)
)

// logLevels maps memberlist's line prefixes to levels.
var logLevels = []struct {
	prefix string
	level  slog.Level
}{{"[DEBUG] ", slog.LevelDebug}, {"[INFO] ", slog.LevelInfo}, {"[WARN] ", slog.LevelWarn}, {"[ERR] ", slog.LevelError}}

// Write implements io.Writer for log.Logger; each call is one line.
// memberlist writes a line for every stream connection and push-pull, so
// Write allocates only the line and leaves out what the logger discards.
func (b *logBridge) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, msg := slog.LevelDebug, line
	for _, l := range logLevels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			level, msg = l.level, strings.TrimPrefix(rest, "memberlist: ")
			break
		}
	}
	if b.onSuspect != nil && strings.HasPrefix(msg, "Suspect ") {
		if m := suspectRE.FindStringSubmatch(msg); m != nil {
			b.onSuspect(m[1])
		}
	}
	if containsFold(msg, "decrypt") {
		b.rejectedFrom(msg)
		return len(p), nil
	}
	if level == slog.LevelInfo {
		level = slog.LevelDebug // memberlist's info lines are chatty
	}
	if b.log.Enabled(context.Background(), level) {
		b.log.Log(context.Background(), level, msg, "component", "memberlist")
	}
	return len(p), nil
}

// containsFold tells whether s contains the lower-case ASCII word sub in
// any case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func (b *logBridge) rejectedFrom(msg string) {
	from := "unknown"
	if m := fromRE.FindStringSubmatch(msg); m != nil {
		from = m[1]
	}
	host := from
	if i := strings.LastIndex(from, ":"); i > 0 {
		host = from[:i] // senders' stream ports change; their hosts do not
	}
	b.mu.Lock()
	b.count[host]++
	last, seen := b.rejected[host]
	now := b.now()
	if seen && now.Sub(last) < rejectLogInterval {
		b.mu.Unlock()
		return
	}
	n := b.count[host]
	b.rejected[host], b.count[host] = now, 0
	b.mu.Unlock()
	b.log.Warn("gossip from a node with a different key rejected: it does not hold this cluster's token or key generation",
		"from", host, "rejected", n, "detail", msg, "next_report_in", rejectLogInterval)
}

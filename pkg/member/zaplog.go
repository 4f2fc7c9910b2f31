package member

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that hands embedded etcd's log entries at or above
// a level to a slog.Logger, and notes whether etcd said that this member was
// removed from the cluster (it says so only in its logs). Once quiet is set
// (the member is shutting down) entries go to slog at debug level: etcd's
// Close logs "server closed" errors that are no news. A warning or error
// that etcd repeats reaches slog at most once per warnEvery, with the count
// of the ones held back (zaplog_throttle.go).
type slogCore struct {
	logger   *slog.Logger
	level    zapcore.Level
	fields   []zapcore.Field
	removed  *atomic.Bool
	quiet    *atomic.Bool
	throttle *logThrottle
}

func newSlogCore(logger *slog.Logger, level zapcore.Level, removed, quiet *atomic.Bool) *slogCore {
	return &slogCore{logger: logger, level: level, removed: removed, quiet: quiet, throttle: newLogThrottle()}
}

// Enabled lets warnings through whatever the slog level, so that the removal
// message is always seen; Write filters what reaches slog.
func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel || l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	cp := *c
	cp.fields = append(append([]zapcore.Field(nil), c.fields...), fields...)
	return &cp
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	if saysRemoved(e.Message) {
		c.removed.Store(true)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		if s, ok := v.(string); ok && saysRemoved(s) {
			c.removed.Store(true)
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	if e.Level < c.level {
		return nil
	}
	if e.Level >= zapcore.WarnLevel {
		ok, held := c.throttle.allow(e.Message, e.Time)
		if !ok {
			return nil
		}
		if held > 0 {
			attrs = append(attrs, slog.Int("repeats-not-logged", held))
		}
		if err, _ := enc.Fields["error"].(string); strings.Contains(err, "too many requests") && strings.Contains(e.Message, "publish") {
			attrs = append(attrs, slog.String("hint", "a member that got its log as a snapshot publishes itself only once an entry after the snapshot is applied: any write to the cluster ends it (docs/etcd-snapshot-join.md)"))
		}
	}
	level := slogLevel(e.Level)
	if c.quiet.Load() {
		level = slog.LevelDebug
	}
	c.logger.LogAttrs(context.Background(), level, "etcd: "+e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// FatalToStderr is the fatal hook of every embedded etcd's zap logger. etcd
// ends the process on a fatal error (zap's default hook calls os.Exit(1)
// even on a no-op logger), and the entry went to a logger nobody might
// read: a test's log is lost when the process exits, leaving a bare
// "exit status 1". This writes the entry to stderr first, then exits as
// etcd expects.
var FatalToStderr zapcore.CheckWriteHook = fatalToStderr{}

type fatalToStderr struct{}

func (fatalToStderr) OnWrite(ce *zapcore.CheckedEntry, fields []zapcore.Field) {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	fmt.Fprintf(os.Stderr, "etcd fatal error, exiting: %s %v\n%s\n", ce.Message, enc.Fields, ce.Stack)
	os.Exit(1)
}

package member

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// recorder is a slog.Handler that keeps the records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func attr(rec slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

// TestSlogCoreThrottlesRepeatedWarnings: etcd's publish loop logs the same
// warning thousands of times a second; one a second reaches slog, with the
// count held back and a hint, and each distinct message still gets through.
func TestSlogCoreThrottlesRepeatedWarnings(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	var removed, quiet atomic.Bool
	core := newSlogCore(slog.New(rec), zapcore.WarnLevel, &removed, &quiet).With([]zapcore.Field{zap.String("local-member-id", "x")})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	publish := zapcore.Entry{Level: zapcore.WarnLevel, Message: "failed to publish local member to cluster through raft"}
	tooMany := []zapcore.Field{zap.Error(errTooManyForTest{})}
	for i := range 1000 {
		publish.Time = t0.Add(time.Duration(i) * time.Millisecond / 2)
		if err := core.Write(publish, tooMany); err != nil {
			t.Fatal(err)
		}
	}
	other := zapcore.Entry{Level: zapcore.WarnLevel, Message: "something else", Time: t0}
	if err := core.Write(other, nil); err != nil {
		t.Fatal(err)
	}
	publish.Time = t0.Add(warnEvery)
	if err := core.Write(publish, tooMany); err != nil {
		t.Fatal(err)
	}
	if len(rec.recs) != 3 {
		t.Fatalf("%d records reached slog, want 3 (first publish, the other message, the next second's publish)", len(rec.recs))
	}
	if _, ok := attr(rec.recs[0], "hint"); !ok {
		t.Errorf("first publish warning has no hint: %v", rec.recs[0])
	}
	if v, ok := attr(rec.recs[2], "repeats-not-logged"); !ok || v.Int64() != 999 {
		t.Errorf("second publish warning: repeats-not-logged = %v (%v), want 999", v, ok)
	}
	if _, ok := attr(rec.recs[1], "repeats-not-logged"); ok {
		t.Errorf("the other message carries a repeat count: %v", rec.recs[1])
	}
}

type errTooManyForTest struct{}

func (errTooManyForTest) Error() string { return "etcdserver: too many requests" }

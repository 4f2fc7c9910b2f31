package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// flagTrace prints, after each measured nico join, every log record of the
// fleet (agents, coordinator, and what their etcd members hand to them) at
// debug level with its time from the start of the join: where the join
// spent its time.
var flagTrace = flag.Bool("nico.trace", false, "print a timeline of every nico join from the fleet's debug log")

// tracer collects log records with their times, for one join at a time.
type tracer struct {
	mu    sync.Mutex
	t0    time.Time
	lines []traceLine
}

type traceLine struct {
	at   time.Time
	text string
}

// reset starts a new timeline at t0.
func (t *tracer) reset(t0 time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0, t.lines = t0, nil
}

// String renders the timeline since the last reset, each line with its
// offset from t0 in milliseconds.
func (t *tracer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, l := range t.lines {
		fmt.Fprintf(&b, "  %8.2f %s\n", ms(l.at.Sub(t.t0)), l.text)
	}
	return b.String()
}

func (t *tracer) add(at time.Time, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.t0.IsZero() {
		t.lines = append(t.lines, traceLine{at: at, text: text})
	}
}

// handler is a slog.Handler that records into t.
func (t *tracer) handler() slog.Handler { return &traceHandler{t: t} }

type traceHandler struct {
	t     *tracer
	attrs string
}

func (h *traceHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.t.add(r.Time, b.String())
	return nil
}

func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &traceHandler{t: h.t, attrs: b.String()}
}

func (h *traceHandler) WithGroup(string) slog.Handler { return h }

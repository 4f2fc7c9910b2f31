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
	// joins holds each finished join's milestones (finish).
	joins []map[string]time.Duration
}

// milestones are the steps of a join that a trace times, in order, each
// found as the first log line that matches: nico's agent and coordinator
// steps, then etcd's own (the leader's "added member" and "promote
// member", the new member's start, first contact with the leader and
// publish). The baselines have no agent: their learner is added by the
// benchmark's own call.
var milestones = []struct {
	name  string
	match func(string) bool
}{
	{"root client", prefix("joining under the root identity")}, // the node's own identity comes after the join
	{"registered", prefix("registered ")},
	{"join filed", prefix("join requested")},
	{"learner added", func(l string) bool {
		return strings.HasPrefix(l, "bench: MemberAddAsLearner: <nil>") || (strings.HasPrefix(l, "etcd: added member") && isLeader(l))
	}},
	{"etcd starts", prefix("etcd: starting an etcd server")},
	{"peer serving", prefix("etcd: now serving peer/client/metrics")},
	{"leader contact", func(l string) bool { return strings.Contains(l, "received a MsgHeartbeat message with higher term") }},
	{"published", prefix("etcd: published local member")},
	{"promoted", func(l string) bool { return strings.HasPrefix(l, "etcd: promote member") && isLeader(l) }},
	{"voter seen", prefix("bench: voter seen")},
}

func prefix(p string) func(string) bool {
	return func(l string) bool { return strings.HasPrefix(l, p) }
}

// isLeader tells a line of the first member of an arm's cluster (nico's
// cp-0, the baselines' k-0), which leads in these benchmarks.
func isLeader(l string) bool {
	return strings.Contains(l, " member=cp-0 ") || strings.Contains(l, " member=k-0 ")
}

// finish records the milestones of the join traced since the last reset.
func (t *tracer) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := map[string]time.Duration{}
	for _, l := range t.lines {
		for _, ms := range milestones {
			if _, seen := m[ms.name]; !seen && ms.match(l.text) {
				m[ms.name] = l.at.Sub(t.t0)
			}
		}
	}
	t.joins = append(t.joins, m)
}

// traceTable renders the median of each milestone over the measured joins
// of each arm (the first join of each, a warm-up, left out).
func traceTable(arms []string, tracers []*tracer) string {
	var tb table
	head := []any{"milestone (p50 ms from the start)"}
	for _, a := range arms {
		head = append(head, a)
	}
	tb.add(head...)
	for _, ms := range milestones {
		row := []any{ms.name}
		for _, t := range tracers {
			var ds []time.Duration
			for i, j := range t.joins {
				if d, ok := j[ms.name]; ok && i > 0 {
					ds = append(ds, d)
				}
			}
			if len(ds) == 0 {
				row = append(row, "-")
				continue
			}
			row = append(row, summarize(ds).p50)
		}
		tb.add(row...)
	}
	return tb.String() + stageTable(arms, tracers)
}

// stageTable renders, per arm, the median and mean of each stage: the
// time to its milestone from the one before it that the join reached (from
// the join's start for the first), over the joins that reached it; then
// each measured join's wait from its member serving peers to the leader's
// first contact, the draw of the leader's heartbeat tick.
func stageTable(arms []string, tracers []*tracer) string {
	var tb table
	head := []any{"stage (ms from the milestone before)"}
	for _, a := range arms {
		head = append(head, a+" p50", a+" mean")
	}
	tb.add(head...)
	for k, m := range milestones {
		row := []any{m.name}
		for _, t := range tracers {
			ds := stageDurations(t.joins, k)
			if len(ds) == 0 {
				row = append(row, "-", "-")
				continue
			}
			row = append(row, ms(summarize(ds).p50), ms(mean(ds)))
		}
		tb.add(row...)
	}
	var b strings.Builder
	b.WriteString(tb.String())
	for i, t := range tracers {
		fmt.Fprintf(&b, "%s: peer serving to leader contact, per join:", arms[i])
		for n, j := range t.joins {
			s, okS := j["peer serving"]
			c, okC := j["leader contact"]
			if n > 0 && okS && okC {
				fmt.Fprintf(&b, " %.0f", ms(c-s))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// stageDurations is, in every measured join that reached milestone k, the
// time to it from the latest milestone before k that the join reached.
func stageDurations(joins []map[string]time.Duration, k int) []time.Duration {
	var ds []time.Duration
	for n, j := range joins {
		at, ok := j[milestones[k].name]
		if !ok || n == 0 {
			continue
		}
		var from time.Duration
		for p := k - 1; p >= 0; p-- {
			if d, ok := j[milestones[p].name]; ok {
				from = d
				break
			}
		}
		ds = append(ds, at-from)
	}
	return ds
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(1, len(ds)))
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

// Package compaction plans the compaction of nico's etcd: which revision
// the coordinator leader compacts to, so that the history of the last
// retention window (and at least the newest revisions asked) is kept and
// what is older is dropped. nico owns its etcd's compaction: the
// Kubernetes API servers on it run with --etcd-compaction-interval=0, and
// etcd's own auto-compaction is off.
//
// etcd records no time per revision, so the leader samples the store's
// revision as its clock moves (History); a revision seen at time T was
// written at T or before, so compacting to the newest sample at least
// Retention old never drops a revision younger than Retention. A new
// leader starts with no samples and compacts nothing until its first is
// Retention old. Plan is pure: samples, the store's revision, the last
// compaction and what is in flight in, a decision out.
//
//	pass: sample (now, revision) --> restore in flight? --yes--> wait
//	                                     | no
//	                                     v
//	         newest sample <= now-retention, capped at revision-minRevisions
//	                                     |
//	               > last compacted and interval since the last? --no--> wait
//	                                     | yes
//	                                     v
//	                                  compact
package compaction

import (
	"fmt"
	"time"
)

// DefaultRetention is the history kept when spec.policy.compactionRetention
// is unset: one hour, well beyond the five minutes the Kubernetes API
// server keeps by default, so a watch resumed after a short outage finds
// its revision.
const DefaultRetention = time.Hour

// Sample is the store's revision as seen at a time.
type Sample struct {
	At       time.Time
	Revision int64
}

// Policy is spec.policy's compaction knobs, defaults filled in.
type Policy struct {
	// Retention is the age of the history kept (DefaultRetention when 0).
	Retention time.Duration
	// MinRevisions also keeps at least this many of the newest revisions.
	MinRevisions int64
}

// retention is p.Retention, or the default.
func (p Policy) retention() time.Duration {
	if p.Retention <= 0 {
		return DefaultRetention
	}
	return p.Retention
}

// Interval is the least time between two compactions: a tenth of the
// retention (six minutes for an hour), so that each removes a tenth of
// the window's worth of history instead of a raft round per pass.
func (p Policy) Interval() time.Duration { return p.retention() / 10 }

// SampleEvery is the least time between two samples of History: a
// hundredth of the retention (36 s for an hour), at least a second.
func (p Policy) SampleEvery() time.Duration { return max(p.retention()/100, time.Second) }

// Observed is what one pass saw.
type Observed struct {
	Now time.Time
	// Revision is the store's current revision.
	Revision int64
	// Compacted and CompactedAt are the last compaction (status), 0 and
	// zero when none is known.
	Compacted   int64
	CompactedAt time.Time
	// Blocked names what forbids a compaction now (a restore in flight),
	// "" when nothing does.
	Blocked string
	// Samples are the History's, oldest first.
	Samples []Sample
}

// Decision is Plan's answer: compact to Revision, or not, and why.
type Decision struct {
	Compact  bool
	Revision int64
	// RetainedSince is the time of the sample compacted to: the history
	// kept starts no later than it.
	RetainedSince time.Time
	Reason        string
}

// Plan decides the pass's compaction.
func Plan(o Observed, p Policy) Decision {
	if o.Blocked != "" {
		return Decision{Reason: "not while " + o.Blocked}
	}
	cutoff := o.Now.Add(-p.retention())
	var pick *Sample
	for i := range o.Samples {
		if o.Samples[i].At.After(cutoff) {
			break
		}
		pick = &o.Samples[i]
	}
	if pick == nil {
		return Decision{Reason: fmt.Sprintf("no revision seen %s ago yet", p.retention())}
	}
	target, since := pick.Revision, pick.At
	if p.MinRevisions > 0 && o.Revision-p.MinRevisions < target {
		target = o.Revision - p.MinRevisions
	}
	if target <= o.Compacted {
		return Decision{Reason: fmt.Sprintf("revision %d is compacted already (the window reaches back to %d)", o.Compacted, target)}
	}
	if !o.CompactedAt.IsZero() && o.Now.Sub(o.CompactedAt) < p.Interval() {
		return Decision{Reason: fmt.Sprintf("compacted %s ago, less than the interval %s", o.Now.Sub(o.CompactedAt), p.Interval())}
	}
	return Decision{Compact: true, Revision: target, RetainedSince: since,
		Reason: fmt.Sprintf("keep %s of history (since %s) and at least %d revisions", p.retention(), since.Format(time.RFC3339), p.MinRevisions)}
}

// History is the revisions a leader saw over time, oldest first: at most
// one sample per SampleEvery, and none older than the newest one that is
// past the retention (it is what Plan compacts to).
type History struct {
	samples []Sample
}

// Add records s unless the last sample is less than p.SampleEvery older
// or holds a revision at least as new (an idle store needs no new
// sample); then drops the samples no compaction under p needs.
func (h *History) Add(s Sample, p Policy) {
	if n := len(h.samples); n > 0 {
		last := h.samples[n-1]
		if s.At.Sub(last.At) < p.SampleEvery() || s.Revision <= last.Revision {
			return
		}
	}
	h.samples = append(h.samples, s)
	cutoff := s.At.Add(-p.retention())
	keep := 0
	for i := range h.samples {
		if !h.samples[i].At.After(cutoff) {
			keep = i
		}
	}
	h.samples = h.samples[keep:]
}

// Samples are the history's samples, oldest first (a copy).
func (h *History) Samples() []Sample { return append([]Sample(nil), h.samples...) }

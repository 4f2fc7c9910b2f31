package etcdstatus

import (
	"math"
	"time"
)

// Sample is one observation of a learner's raft index beside the leader's.
type Sample struct {
	At      time.Time
	Learner uint64
	Leader  uint64
}

// Progress is a learner's catch-up: its raft index as a fraction of the
// leader's (0..1) and the time left at the observed rate (0: unknown, or
// caught up).
type Progress struct {
	Fraction float64
	ETA      time.Duration
}

// Estimate returns the progress of a learner from its samples, oldest
// first. The fraction is the newest sample's; the ETA divides the newest
// gap (leader - learner) by the rate at which the gap closed from the
// oldest sample to the newest: a gap that did not close has no ETA. ok is
// false when there is no sample or the leader's index is unknown.
func Estimate(samples []Sample) (p Progress, ok bool) {
	if len(samples) == 0 {
		return Progress{}, false
	}
	last := samples[len(samples)-1]
	if last.Leader == 0 {
		return Progress{}, false
	}
	p.Fraction = math.Min(1, float64(last.Learner)/float64(last.Leader))
	gap := gapOf(last)
	if gap == 0 {
		p.Fraction = 1
		return p, true
	}
	first := samples[0]
	dt := last.At.Sub(first.At)
	closed := gapOf(first) - gap
	if dt <= 0 || closed <= 0 {
		return p, true
	}
	rate := closed / dt.Seconds() // entries per second
	p.ETA = time.Duration(gap / rate * float64(time.Second)).Round(100 * time.Millisecond)
	return p, true
}

func gapOf(s Sample) float64 {
	if s.Learner >= s.Leader {
		return 0
	}
	return float64(s.Leader - s.Learner)
}

// History keeps a short window of samples per learner.
type History[K comparable] struct {
	// Window bounds the age of the oldest sample kept; Max their count.
	Window time.Duration
	Max    int
	byKey  map[K][]Sample
}

// Add records s for key, dropping samples older than the window (the
// newest is always kept) and beyond Max.
func (h *History[K]) Add(key K, s Sample) []Sample {
	if h.byKey == nil {
		h.byKey = map[K][]Sample{}
	}
	ss := append(h.byKey[key], s)
	for len(ss) > 1 && (s.At.Sub(ss[0].At) > h.Window || (h.Max > 0 && len(ss) > h.Max)) {
		ss = ss[1:]
	}
	h.byKey[key] = ss
	return ss
}

// Retain forgets every key keep does not hold.
func (h *History[K]) Retain(keep func(K) bool) {
	for k := range h.byKey {
		if !keep(k) {
			delete(h.byKey, k)
		}
	}
}

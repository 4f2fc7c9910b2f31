package controller

import (
	"maps"
	"sync"
	"time"
)

// State is where a controller is in its loop (see the package doc).
type State string

// A controller's states.
const (
	Starting    State = "starting"
	Waiting     State = "waiting"
	Reconciling State = "reconciling"
	Backoff     State = "backoff"
	Restarting  State = "restarting"
	Stopped     State = "stopped"
)

// Health is a snapshot of one controller's record. It outlives the
// controller's group: a leader's controllers keep their record, Running
// false, while the candidate follows.
type Health struct {
	Name  string
	State State
	// Since is when State began.
	Since time.Time
	// Running is true while the controller's group runs.
	Running bool
	// LastSuccess is when a reconcile last succeeded.
	LastSuccess time.Time
	// LastError is the last failed reconcile's or start's error, kept
	// after later successes; LastErrorAt is when it happened.
	LastError   error
	LastErrorAt time.Time
	// Failures counts failed reconciles since the last success.
	Failures int
	// Restarts counts restarts after a failed start or a panic.
	Restarts int
	// Reconciles counts reconciles run, Events the watch events seen,
	// Rewatches the watches opened again after they closed, Resyncs the
	// full resyncs after a compacted watch.
	Reconciles, Events, Rewatches, Resyncs uint64
	// WatchedTo is, for each watched prefix, the store revision its watch
	// has delivered events up to: the start revision until its first
	// event. A reader that wrote under a prefix at revision r knows the
	// controller has counted that event once WatchedTo[prefix] >= r.
	WatchedTo map[string]int64

	policy HealthPolicy // the controller's own, when it has one (Policied)
}

// healthy reports whether h counts as healthy at now under the policy. A
// controller that is not running is: it has nothing to do.
func (h Health) healthy(now time.Time, p healthPolicy) bool {
	if h.policy.MaxFailures > 0 {
		p.maxFailures = h.policy.MaxFailures
	}
	switch {
	case h.policy.StallAfter < 0:
		p.stallAfter = 0
	case h.policy.StallAfter > 0:
		p.stallAfter = h.policy.StallAfter
	}
	switch {
	case !h.Running:
		return true
	case h.State == Restarting:
		return false
	case h.Failures >= p.maxFailures:
		return false
	case h.State == Reconciling && p.stallAfter > 0 && now.Sub(h.Since) >= p.stallAfter:
		return false
	}
	return true
}

// healthPolicy says when a running controller stops counting as healthy.
type healthPolicy struct {
	maxFailures int
	stallAfter  time.Duration
}

// record is one controller's Health, updated by its supervisor.
type record struct {
	mu sync.Mutex
	h  Health
}

func (r *record) update(f func(h *Health)) {
	r.mu.Lock()
	f(&r.h)
	r.mu.Unlock()
}

func (r *record) snapshot() Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.WatchedTo = maps.Clone(r.h.WatchedTo)
	return h
}

// watched records that prefix's watch has delivered up to rev.
func (r *record) watched(prefix string, rev int64, events int) {
	r.update(func(h *Health) {
		if h.WatchedTo == nil {
			h.WatchedTo = map[string]int64{}
		}
		h.WatchedTo[prefix] = rev
		h.Events += uint64(events)
	})
}

func (r *record) setState(now time.Time, s State) {
	r.update(func(h *Health) {
		if h.State != s {
			h.State, h.Since = s, now
		}
	})
}

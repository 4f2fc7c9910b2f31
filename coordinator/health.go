package coordinator

import (
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// candidacy is what the service manager is told about a candidate: it has
// an election session and campaigns (or leads) under it.
type candidacy struct {
	sess atomic.Pointer[concurrency.Session] // of the term running now
	once sync.Once
	ch   chan struct{} // closed when the first term campaigns
}

func (h *candidacy) started() chan struct{} {
	h.once.Do(func() { h.ch = make(chan struct{}) })
	return h.ch
}

// campaigning records that a term has its session and starts campaigning
// under it (coordinator.go's term).
func (h *candidacy) campaigning(sess *concurrency.Session) {
	h.sess.Store(sess)
	ch := h.started()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Campaigning is closed once the candidate first has its election session
// and campaigns: nico-coordinator tells systemd it is ready then, leader or
// not.
func (c *Coordinator) Campaigning() <-chan struct{} { return c.candidacy.started() }

// Healthy tells whether the candidate's election session is alive, so it
// campaigns or leads, and the leader's controllers are healthy (none
// restarting, failing again and again, or stalled; a candidate that is not
// leader runs none). It turns false when the session expires or closes and
// true again once the next term has its session; the watchdog is fed only
// while it holds.
func (c *Coordinator) Healthy() bool {
	if !c.rt.Healthy() {
		return false
	}
	s := c.candidacy.sess.Load()
	if s == nil {
		return false
	}
	select {
	case <-s.Done():
		return false
	default:
		return true
	}
}

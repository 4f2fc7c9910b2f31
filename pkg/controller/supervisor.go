package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// supervisor runs one controller: it restarts the controller's loop when
// that fails, and records its health.
type supervisor struct {
	rt  *Runtime
	c   Controller
	rec *record
	log *slog.Logger
	// kick holds at most one pending reconcile: events coalesce into it.
	kick chan struct{}
}

func newSupervisor(rt *Runtime, c Controller, rec *record) *supervisor {
	return &supervisor{rt: rt, c: c, rec: rec, log: rt.log.With("controller", c.Name()), kick: make(chan struct{}, 1)}
}

// fatalError carries a reconcile error that ends the group.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }

// run runs the controller until ctx ends (nil) or a fatal error (returned).
func (s *supervisor) run(ctx context.Context) error {
	restart := s.rt.newBackoff()
	for {
		err := s.runOnce(ctx, restart)
		if ctx.Err() != nil {
			return nil
		}
		if f, ok := errors.AsType[fatalError](err); ok {
			s.log.Warn("controller stopped its group", "err", f.err)
			return f.err
		}
		d := restart.NextBackOff()
		now := s.rt.clock.Now()
		s.rec.update(func(h *Health) {
			h.Restarts++
			h.LastError, h.LastErrorAt = err, now
			h.State, h.Since = Restarting, now
		})
		s.log.Warn("controller failed; restarting", "err", err, "in", d)
		if !s.sleep(ctx, d) {
			return nil
		}
	}
}

// sleep waits d on the runtime's clock; false when ctx ended first.
func (s *supervisor) sleep(ctx context.Context, d time.Duration) bool {
	t := s.rt.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// runOnce starts the controller (current revision, watches from it) and
// loops on its triggers until ctx ends, a reconcile panics (restart) or a
// fatal error. A success resets restart.
func (s *supervisor) runOnce(ctx context.Context, restart backoff.BackOff) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.rec.setState(s.rt.clock.Now(), Starting)
	prefixes := s.c.Watches()
	var rev int64
	if len(prefixes) > 0 { // else tick-only: no revision, no watch
		var err error
		if rev, err = currentRevision(ctx, s.rt.src, prefixes[0]); err != nil {
			return fmt.Errorf("controller %s: start: %w", s.c.Name(), err)
		}
	}
	for _, p := range prefixes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watch(ctx, p, rev)
		}()
	}
	var tick <-chan time.Time
	if d := resyncInterval(s.c); d > 0 {
		t := s.rt.clock.NewTicker(d)
		defer t.Stop()
		tick = t.Chan()
	}
	var wakes <-chan struct{}
	if w, ok := s.c.(Waker); ok {
		wakes = w.Wakes()
	}
	requeue := s.rt.newBackoff()
	var retry clockwork.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	settle := settleDelay(s.c)
	s.trigger() // the first reconcile, at rev or later
	for first := true; ; first = false {
		if retry == nil {
			s.rec.setState(s.rt.clock.Now(), Waiting)
		}
		event := false
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			event = true
		case <-wakes:
			event = true
		case <-tick:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
			retry, retryC = nil, nil
		}
		if event && !first && settle > 0 {
			// Let the burst this event began gather: the reconcile after
			// it re-reads everything, so the kicks meanwhile are spent.
			if !s.sleep(ctx, settle) {
				return nil
			}
			s.drainKick()
		}
		err := s.reconcile(ctx)
		now := s.rt.clock.Now()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			s.rec.update(func(h *Health) { h.LastSuccess, h.Failures = now, 0 })
			requeue.Reset()
			restart.Reset()
			continue
		}
		if p, ok := errors.AsType[panicError](err); ok {
			return p
		}
		if s.rt.fatal != nil && s.rt.fatal(err) {
			return fatalError{err}
		}
		// The retry is armed before the health says Backoff: whoever sees
		// the failure in the health (a test's injected clock among them)
		// sees the retry's timer already running.
		d := requeue.NextBackOff()
		retry = s.rt.clock.NewTimer(d)
		retryC = retry.Chan()
		s.rec.update(func(h *Health) {
			h.Failures++
			h.LastError, h.LastErrorAt = err, now
			h.State, h.Since = Backoff, now
		})
		s.log.Warn("reconcile failed; retrying", "err", err, "in", d)
	}
}

// panicError is a recovered panic of Reconcile.
type panicError struct {
	value any
	stack []byte
}

func (p panicError) Error() string {
	return fmt.Sprintf("reconcile panicked: %v\n%s", p.value, p.stack)
}

// reconcile runs one Reconcile, turning a panic into a panicError.
func (s *supervisor) reconcile(ctx context.Context) (err error) {
	s.rec.update(func(h *Health) {
		h.Reconciles++
		h.State, h.Since = Reconciling, s.rt.clock.Now()
	})
	defer func() {
		if v := recover(); v != nil {
			err = panicError{value: v, stack: debug.Stack()}
		}
	}()
	return s.c.Reconcile(ctx)
}

// trigger asks for a reconcile; with one already pending it does nothing.
func (s *supervisor) trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// drainKick drops a pending kick: the reconcile about to run covers it.
func (s *supervisor) drainKick() {
	select {
	case <-s.kick:
	default:
	}
}

// settleDelay is c's SettleDelay, or zero when it has none.
func settleDelay(c Controller) time.Duration {
	if st, ok := c.(Settler); ok {
		return st.SettleDelay()
	}
	return 0
}

// currentRevision reads the store's revision.
func currentRevision(ctx context.Context, src Source, key string) (int64, error) {
	return store.CurrentRevision(ctx, src, key)
}

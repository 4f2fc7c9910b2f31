package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
)

// Runtime runs groups of controllers against one store and keeps every
// controller's Health. New starts nothing; Run blocks.
type Runtime struct {
	src        Source
	clock      clockwork.Clock
	log        *slog.Logger
	newBackoff func() backoff.BackOff
	fatal      func(error) bool
	policy     healthPolicy

	mu      sync.Mutex
	records map[string]*record
	order   []string
}

// Option configures a Runtime.
type Option func(*Runtime)

// WithClock sets the clock of resync ticks, backoffs and Health times.
func WithClock(c clockwork.Clock) Option { return func(r *Runtime) { r.clock = c } }

// WithLogger sets the logger; each controller logs with its name.
func WithLogger(l *slog.Logger) Option { return func(r *Runtime) { r.log = l } }

// WithBackoff sets the policy of requeues after a failed reconcile,
// restarts and re-watches; f is called for a fresh policy each time one is
// needed. The default is exponential from 100ms to 5s with 20% jitter.
func WithBackoff(f func() backoff.BackOff) Option { return func(r *Runtime) { r.newBackoff = f } }

// WithFatal makes the reconcile errors for which fatal holds end the whole
// group: Run stops it and returns the error (a leader's group ends on
// store.ErrNotLeader).
func WithFatal(fatal func(error) bool) Option { return func(r *Runtime) { r.fatal = fatal } }

// WithHealthPolicy sets when a running controller stops counting as
// healthy: after maxFailures failed reconciles in a row (default 3), or a
// reconcile running for stallAfter (default 5 minutes; zero: never).
func WithHealthPolicy(maxFailures int, stallAfter time.Duration) Option {
	return func(r *Runtime) { r.policy = healthPolicy{maxFailures: maxFailures, stallAfter: stallAfter} }
}

// DefaultBackoff is the default policy of WithBackoff.
func DefaultBackoff() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: 5 * time.Second}
}

// New returns a runtime reading from src (the store's scoped client). It
// starts nothing.
func New(src Source, opts ...Option) *Runtime {
	r := &Runtime{
		src:        src,
		clock:      clockwork.NewRealClock(),
		log:        slog.New(slog.DiscardHandler),
		newBackoff: DefaultBackoff,
		policy:     healthPolicy{maxFailures: 3, stallAfter: 5 * time.Minute},
		records:    map[string]*record{},
	}
	for _, o := range opts {
		o(r)
	}
	if r.policy.maxFailures <= 0 {
		r.policy.maxFailures = 1
	}
	return r
}

// Errors of Run.
var (
	// ErrInvalid: a controller's declaration was refused.
	ErrInvalid = errors.New("controller: invalid controller")
	// ErrRunning: a controller of that name runs already.
	ErrRunning = errors.New("controller: already running")
)

// Run runs the controllers as one group until ctx ends, then stops them
// in reverse order and returns nil. When a reconcile error is fatal
// (WithFatal), it stops the group the same way and returns that error. It
// refuses, starting nothing, a controller without a name, one with neither
// watches nor a resync interval, one that watches the whole keyspace, and a
// name already running.
func (r *Runtime) Run(ctx context.Context, ctrls ...Controller) error {
	recs, err := r.claim(ctrls)
	if err != nil {
		return err
	}
	defer r.release(recs)
	type member struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	fatal := make(chan error, len(ctrls))
	members := make([]member, 0, len(ctrls))
	// Each controller's context is cancelled by the shutdown below, not by
	// ctx, so that the group stops in reverse order.
	base := context.WithoutCancel(ctx)
	for i, c := range ctrls {
		cctx, cancel := context.WithCancel(base)
		m := member{cancel: cancel, done: make(chan struct{})}
		members = append(members, m)
		s := newSupervisor(r, c, recs[i])
		go func() {
			defer close(m.done)
			if err := s.run(cctx); err != nil {
				fatal <- err
			}
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-fatal:
	}
	for _, m := range slices.Backward(members) {
		m.cancel()
		<-m.done
	}
	return err
}

// claim validates ctrls and marks their records running.
func (r *Runtime) claim(ctrls []Controller) ([]*record, error) {
	seen := map[string]bool{}
	for _, c := range ctrls {
		name := c.Name()
		switch {
		case name == "":
			return nil, fmt.Errorf("%w: a controller has no name", ErrInvalid)
		case seen[name]:
			return nil, fmt.Errorf("%w: %s: name given twice", ErrInvalid, name)
		case len(c.Watches()) == 0 && resyncInterval(c) <= 0:
			return nil, fmt.Errorf("%w: %s: watches nothing and has no resync interval; want at least one key prefix, or a tick", ErrInvalid, name)
		case slices.Contains(c.Watches(), ""):
			return nil, fmt.Errorf("%w: %s: watches \"\", the whole keyspace; want its own key prefixes", ErrInvalid, name)
		}
		seen[name] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range ctrls {
		if rec := r.records[c.Name()]; rec != nil && rec.snapshot().Running {
			return nil, fmt.Errorf("%w: %s", ErrRunning, c.Name())
		}
	}
	now := r.clock.Now()
	recs := make([]*record, 0, len(ctrls))
	for _, c := range ctrls {
		rec := r.records[c.Name()]
		if rec == nil {
			rec = &record{h: Health{Name: c.Name()}}
			r.records[c.Name()] = rec
			r.order = append(r.order, c.Name())
		}
		// A new run starts with a clean slate of failures; the counters
		// and the last error stay.
		var policy HealthPolicy
		if p, ok := c.(Policied); ok {
			policy = p.HealthPolicy()
		}
		rec.update(func(h *Health) { h.Running, h.State, h.Since, h.Failures, h.policy = true, Starting, now, 0, policy })
		recs = append(recs, rec)
	}
	return recs, nil
}

// release marks the records of a stopped group.
func (r *Runtime) release(recs []*record) {
	now := r.clock.Now()
	for _, rec := range recs {
		rec.update(func(h *Health) { h.Running, h.State, h.Since = false, Stopped, now })
	}
}

// Health returns a snapshot of every controller that ran, in the order
// they first ran.
func (r *Runtime) Health() []Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Health, 0, len(r.order))
	for _, name := range r.order {
		out = append(out, r.records[name].snapshot())
	}
	return out
}

// Healthy reports whether every running controller is healthy: not
// restarting, fewer failed reconciles in a row than the policy allows, and
// no reconcile stalled. Controllers that are not running count as healthy.
func (r *Runtime) Healthy() bool {
	now := r.clock.Now()
	for _, h := range r.Health() {
		if !h.healthy(now, r.policy) {
			return false
		}
	}
	return true
}

// resyncInterval is c's resync period; zero without one.
func resyncInterval(c Controller) time.Duration {
	if rs, ok := c.(Resyncer); ok {
		return rs.ResyncInterval()
	}
	return 0
}

// Package conformance checks a controller against the runtime's contract
// (package controller): what it declares, that Reconcile is idempotent at
// rest (level-triggered, and quiet once converged, so its own writes do not
// wake it for ever), that it honours its context, and that it runs under a
// real Runtime on real etcd. Every controller's tests call Run:
//
//	conformance.Run(t, conformance.Case{Store: st, New: func(t *testing.T) controller.Controller { ... }})
package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// Case is one controller under test.
type Case struct {
	// Store is the store the controller reads and writes, its inputs
	// already in place.
	Store *store.Store
	// New returns a fresh controller over Store.
	New func(t *testing.T) controller.Controller
	// Timeout bounds each check; zero: 30 seconds.
	Timeout time.Duration
}

// Check is one rule of the contract; it returns what the controller got
// wrong.
type Check struct {
	Name string
	Fn   func(ctx context.Context, st *store.Store, c controller.Controller) error
}

// Checks are the rules Run applies, in order.
var Checks = []Check{
	{"Declaration", Declaration},
	{"IdempotentAtRest", IdempotentAtRest},
	{"HonoursCancellation", HonoursCancellation},
	{"RunsUnderTheRuntime", RunsUnderTheRuntime},
}

// Run applies every check to a fresh controller of tc, each as a subtest.
func Run(t *testing.T, tc Case) {
	t.Helper()
	timeout := tc.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	for _, ch := range Checks {
		t.Run(ch.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := ch.Fn(ctx, tc.Store, tc.New(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Declaration: a name, at least one prefix (or, tick-only, a resync
// interval), each relative to the store's
// prefix, none the whole keyspace, none twice.
func Declaration(_ context.Context, st *store.Store, c controller.Controller) error {
	if c.Name() == "" {
		return errors.New("the controller's Name is empty; want its name, unique among the runtime's controllers")
	}
	ws := c.Watches()
	if rs, ok := c.(controller.Resyncer); len(ws) == 0 && (!ok || rs.ResyncInterval() <= 0) {
		return fmt.Errorf("%s: Watches is empty and there is no resync interval; want the key prefixes it reads, or a tick", c.Name())
	}
	for i, w := range ws {
		switch {
		case w == "":
			return fmt.Errorf("%s: watches \"\", the whole keyspace; want its own prefixes", c.Name())
		case strings.HasPrefix(w, "/") || strings.HasPrefix(w, st.Prefix()):
			return fmt.Errorf("%s: watch %q is absolute; want it relative to the store prefix %q", c.Name(), w, st.Prefix())
		case slices.Contains(ws[:i], w):
			return fmt.Errorf("%s: watches %q twice", c.Name(), w)
		}
	}
	return nil
}

// IdempotentAtRest: with its inputs unchanged, a second Reconcile writes
// nothing (the store's revision stays), so the controller's own writes
// cannot keep waking it.
func IdempotentAtRest(ctx context.Context, st *store.Store, c controller.Controller) error {
	if err := c.Reconcile(ctx); err != nil {
		return fmt.Errorf("%s: first Reconcile: %w", c.Name(), err)
	}
	before, err := revision(ctx, st)
	if err != nil {
		return err
	}
	if err := c.Reconcile(ctx); err != nil {
		return fmt.Errorf("%s: second Reconcile: %w", c.Name(), err)
	}
	after, err := revision(ctx, st)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s: a second Reconcile over unchanged inputs wrote (revision %d -> %d); a converged controller writes nothing", c.Name(), before, after)
	}
	return nil
}

// HonoursCancellation: Reconcile on an ended context returns, and writes
// nothing.
func HonoursCancellation(ctx context.Context, st *store.Store, c controller.Controller) error {
	before, err := revision(ctx, st)
	if err != nil {
		return err
	}
	dead, cancel := context.WithCancel(ctx)
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Reconcile(dead)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("%s: Reconcile on an ended context did not return", c.Name())
	}
	after, err := revision(ctx, st)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s: Reconcile on an ended context wrote (revision %d -> %d)", c.Name(), before, after)
	}
	return nil
}

// RunsUnderTheRuntime: under a Runtime (with a fake clock, so no resync or
// backoff fires), the controller reconciles successfully, is healthy, and
// stops when its group's context ends.
func RunsUnderTheRuntime(ctx context.Context, st *store.Store, c controller.Controller) error {
	rt := controller.New(st.Client(), controller.WithClock(clockwork.NewFakeClock()))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx, c) }()
	succeeded := func() (bool, error) {
		hs := rt.Health()
		switch {
		case len(hs) != 1:
			return false, nil
		case !hs[0].LastSuccess.IsZero():
			return true, nil
		case hs[0].LastError != nil:
			return false, fmt.Errorf("%s: under the runtime: %w", c.Name(), hs[0].LastError)
		}
		return false, nil
	}
	var err error
	for err == nil {
		ok, serr := succeeded()
		if serr != nil {
			err = serr
			break
		}
		if ok {
			if !rt.Healthy() {
				err = fmt.Errorf("%s: not healthy after a success: %+v", c.Name(), rt.Health())
			}
			break
		}
		select {
		case rerr := <-done: // Run returned already: nothing to stop
			return fmt.Errorf("%s: Run returned before a reconcile: %v", c.Name(), rerr)
		case <-ctx.Done():
			err = fmt.Errorf("%s: no successful reconcile under the runtime: %w", c.Name(), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	select {
	case rerr := <-done:
		if err == nil && rerr != nil {
			err = fmt.Errorf("%s: Run: %w", c.Name(), rerr)
		}
	case <-time.After(30 * time.Second):
		if err == nil {
			err = fmt.Errorf("%s: Run did not return after its context ended", c.Name())
		}
	}
	return err
}

// revision reads the store's current revision.
func revision(ctx context.Context, st *store.Store) (int64, error) {
	rev, err := st.Revision(ctx)
	if err != nil {
		return 0, fmt.Errorf("conformance: %w", err)
	}
	return rev, nil
}

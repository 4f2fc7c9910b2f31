package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
)

// errInjected is the error faultAdmin's faults return.
var errInjected = errors.New("faultadmin: injected failure")

// MemberAdmin's methods, as faultAdmin's faults name them.
const (
	callObserve    = "Observe"
	callAddLearner = "AddLearner"
	callPromote    = "Promote"
	callRemove     = "Remove"
	callMoveLeader = "MoveLeader"
)

// faultAdmin is MemberAdmin's error-injecting fake: it forwards to another
// MemberAdmin and fails the calls armed with a fault, either before the
// call (nothing changed) or after it (the change is made and the caller
// sees an error: an answer lost on the way back). With nothing armed it is
// the MemberAdmin it forwards to.
type faultAdmin struct {
	next MemberAdmin

	mu     sync.Mutex
	faults []fault
	fired  []string
}

// fault fails the next call of method.
type fault struct {
	method string
	after  bool // the call is made first
}

func (f fault) String() string {
	if f.after {
		return f.method + " (after the change)"
	}
	return f.method + " (before the change)"
}

// arm fails the next call of method once.
func (f *faultAdmin) arm(method string, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault{method: method, after: after})
}

// fire runs call unless a fault is armed for method; see faultAdmin.
func (f *faultAdmin) fire(method string, call func() error) error {
	f.mu.Lock()
	var armed *fault
	for i, ft := range f.faults {
		if ft.method == method {
			armed = &ft
			f.faults = append(f.faults[:i], f.faults[i+1:]...)
			f.fired = append(f.fired, ft.String())
			break
		}
	}
	f.mu.Unlock()
	if armed == nil {
		return call()
	}
	if armed.after {
		if err := call(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w", armed, errInjected)
}

// firedFaults lists the faults that fired, in order.
func (f *faultAdmin) firedFaults() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.fired...)
}

// Observe implements MemberAdmin.
func (f *faultAdmin) Observe(ctx context.Context) (ms []membership.Member, err error) {
	err = f.fire(callObserve, func() error { ms, err = f.next.Observe(ctx); return err })
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// AddLearner implements MemberAdmin.
func (f *faultAdmin) AddLearner(ctx context.Context, name, peerURL string) (id api.MemberID, initial string, err error) {
	err = f.fire(callAddLearner, func() error { id, initial, err = f.next.AddLearner(ctx, name, peerURL); return err })
	if err != nil {
		return 0, "", err
	}
	return id, initial, nil
}

// Promote implements MemberAdmin.
func (f *faultAdmin) Promote(ctx context.Context, voters []string, id api.MemberID, learnerURL, leaderURL string, progress func(uint64)) error {
	return f.fire(callPromote, func() error { return f.next.Promote(ctx, voters, id, learnerURL, leaderURL, progress) })
}

// Remove implements MemberAdmin.
func (f *faultAdmin) Remove(ctx context.Context, id api.MemberID) error {
	return f.fire(callRemove, func() error { return f.next.Remove(ctx, id) })
}

// MoveLeader implements MemberAdmin.
func (f *faultAdmin) MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error {
	return f.fire(callMoveLeader, func() error { return f.next.MoveLeader(ctx, leaderURL, to) })
}

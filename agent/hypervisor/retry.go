package hypervisor

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// defaultMachineRetry is the backoff of a machine whose domain action keeps
// failing: about 1 s, 2 s, 4 s... up to 5 minutes.
func defaultMachineRetry() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: time.Second, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 5 * time.Minute}
}

// machineRetries holds the per-machine backoff of a host's domain actions.
// A machine whose define or start keeps failing (an unknown network, a
// kernel file missing, libvirt refusing the definition) is retried after a
// growing, jittered delay rather than on every pass, and its last error
// stays in its status meanwhile. The connection to libvirt being down is
// not a machine's failure: the whole pass backs off then (Controller).
//
//	action fails ------------------> due = now + the machine's next backoff, error kept
//	pass before due ---------------> action skipped, the kept error reported
//	pass at or after due ----------> action tried again
//	the action changes (new spec) -> tried at once, failures from 0
//	action succeeds, or none left -> forgotten
//
// It is pure: the caller passes the time.
type machineRetries struct {
	b     func() backoff.BackOff // a machine's policy, fresh for each
	state map[string]retryState  // by machine UUID
}

type retryState struct {
	// sig identifies the failing action (kind and spec): a different
	// action for the machine is not held back by the old one's failures.
	sig string
	b   backoff.BackOff // its delays so far
	due time.Time
	err error
}

func newMachineRetries(b func() backoff.BackOff) *machineRetries {
	return &machineRetries{b: b, state: map[string]retryState{}}
}

// due tells whether the action sig for uuid may run at now; when it may
// not, it returns the error of its last failure.
func (r *machineRetries) due(uuid, sig string, now time.Time) (bool, error) {
	s, ok := r.state[uuid]
	if !ok || s.sig != sig || !now.Before(s.due) {
		return true, nil
	}
	return false, s.err
}

// failed records a failure of action sig for uuid at now and returns the
// delay before it is due again.
func (r *machineRetries) failed(uuid, sig string, err error, now time.Time) time.Duration {
	s := r.state[uuid]
	if s.sig != sig || s.b == nil {
		s = retryState{sig: sig, b: r.b()}
	}
	d := s.b.NextBackOff()
	s.due, s.err = now.Add(d), err
	r.state[uuid] = s
	return d
}

// succeeded forgets uuid's failures.
func (r *machineRetries) succeeded(uuid string) { delete(r.state, uuid) }

// keepOnly forgets every machine that has no action in this pass.
func (r *machineRetries) keepOnly(uuids map[string]bool) {
	for u := range r.state {
		if !uuids[u] {
			delete(r.state, u)
		}
	}
}

// next returns the earliest time an action held back is due.
func (r *machineRetries) next() (time.Time, bool) {
	var first time.Time
	for _, s := range r.state {
		if first.IsZero() || s.due.Before(first) {
			first = s.due
		}
	}
	return first, !first.IsZero()
}

// actionSig identifies a domain action for the backoff: its kind and the
// spec it applies, without the first-boot identity (it holds the token).
func actionSig(a domainAction) string {
	s := a.Spec
	s.Identity.Token = ""
	return fmt.Sprintf("%s %+v", a.Kind, s)
}

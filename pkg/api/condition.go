package api

import "time"

// Condition is one observation about an object, as Kubernetes shows them:
// a type, whether it holds, a machine-readable reason and a message for
// people.
type Condition struct {
	Type    string    `json:"type"`
	Status  bool      `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitempty"`
}

// Condition types.
const (
	// CondScheduled: the machine has a host.
	CondScheduled = "Scheduled"
	// CondProvisioned: the host defined and started the domain.
	CondProvisioned = "Provisioned"
	// CondBooted: a machine's running domain showed a sign that its guest
	// booted (console output, an address, its node registered); false with
	// reason Booting while it waits, NotBooting when none came within the
	// host's hypervisor.bootTimeout. Only a running machine has it.
	CondBooted = "Booted"
	// CondReady: a pool has all its machines running.
	CondReady = "Ready"
	// CondValid: a pool's spec can be satisfied by some host.
	CondValid = "Valid"
	// CondScaleDown: a pool is waiting for machines' nodes to leave.
	CondScaleDown = "ScaleDown"
)

// SetCondition sets c in conds, keeping Since when the status did not change,
// and returns the new slice and whether anything changed.
func SetCondition(conds []Condition, c Condition) ([]Condition, bool) {
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status && conds[i].Reason == c.Reason && conds[i].Message == c.Message {
			return conds, false
		}
		if conds[i].Status == c.Status {
			c.Since = conds[i].Since
		}
		out := append([]Condition(nil), conds...)
		out[i] = c
		return out, true
	}
	return append(append([]Condition(nil), conds...), c), true
}

// FindCondition returns the condition of type t, or nil.
func FindCondition(conds []Condition, t string) *Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// Package events derives the fleet's events (what happened, when, to which
// object) from changes of its stored objects: the operation journal, the
// join and removal requests, rollouts, generations, node liveness and the
// conditions of machines, pools and the etcd cluster.
//
// Derivation is pure: Derive takes an object's value before and after one
// change and returns the events that change records, so that the events of
// an object read whole (no value before) are everything it still records,
// and those of each later change only what the change added. Feed reads
// and follows the keyspace with it.
package events

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Event types, as Kubernetes names them.
const (
	Normal  = "Normal"  // progress as planned
	Warning = "Warning" // a refusal, a failure, a node going away
)

// Event is one thing that happened. Its JSON form is stable: every field
// is always present (nodes is [] and op "" when there are none).
type Event struct {
	// Time is when it happened, as the object records it (the writer's
	// clock); for a fact with no recorded time, when the object was last
	// updated.
	Time time.Time `json:"time"`
	// Kind and Name name the object it was read from.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Type is Normal or Warning.
	Type string `json:"type"`
	// Reason is a CamelCase word for what happened (Joined, Refused...).
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Nodes are the nodes it concerns.
	Nodes []string `json:"nodes"`
	// Op is the operation it belongs to.
	Op string `json:"op"`
	// Revision is the etcd revision of the change it was derived from.
	Revision int64 `json:"revision"`
}

// Object is the event's object as "kind/name".
func (e Event) Object() string { return e.Kind + "/" + e.Name }

// About tells whether e concerns node.
func (e Event) About(node string) bool { return slices.Contains(e.Nodes, node) }

// Change is one change of one key: its value before (nil: it did not
// exist, or the object is read whole) and after (nil: deleted).
type Change struct {
	// Key is relative to the keyspace prefix (store.OpKey and friends).
	Key       string
	Prev, Cur []byte
	Revision  int64
	// At is when the change was seen: the time of facts the object does
	// not time itself (a deletion).
	At time.Time
}

// Sort orders events by time, then revision, keeping the order of the
// rest (the order they were derived in).
func Sort(evs []Event) {
	slices.SortStableFunc(evs, func(a, b Event) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Revision, b.Revision))
	})
}

// event builds an event of the change c with its nodes never nil.
func (c Change) event(at time.Time, kind, name, typ, reason, msg, op string, nodes ...string) Event {
	ns := []string{}
	for _, n := range nodes {
		if n != "" && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	if at.IsZero() {
		at = c.At
	}
	return Event{Time: at, Kind: kind, Name: name, Type: typ, Reason: reason, Message: strings.TrimSpace(msg), Nodes: ns, Op: op, Revision: c.Revision}
}

// firstSet returns the first non-zero time.
func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string { return cmp.Or(s, "-") }

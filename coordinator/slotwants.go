package coordinator

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// slotWants records, for the term, the leader's controllers that wait for
// the one-change slot (store.ActiveOpKey) while another operation holds
// it, and what each would do with it. The rollout controller reads it: a
// data-plane step that keeps starting nodes as others finish
// (rollout.Extend) would otherwise hold the slot until the whole data
// plane is done. While a change waits, a rollout starts no more nodes
// and no new step, so the slot comes free when the step's nodes finish.
//
// Each controller sets its want on every pass: it says what it would do
// with the slot free, or clears it. A want not set again within ttl is
// dropped (its controller stopped passing).
type slotWants struct {
	now func() time.Time
	ttl time.Duration

	mu    sync.Mutex
	wants map[string]slotWant // by controller
}

type slotWant struct {
	what string
	at   time.Time
}

// newSlotWants returns the wants of a term whose controllers pass at
// least every resync.
func newSlotWants(now func() time.Time, resync time.Duration) *slotWants {
	return &slotWants{now: now, ttl: max(10*time.Second, 3*resync), wants: map[string]slotWant{}}
}

// set records what controller who would do with the slot, or clears its
// want when what is "". A nil slotWants records nothing.
func (w *slotWants) set(who, what string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if what == "" {
		delete(w.wants, who)
		return
	}
	w.wants[who] = slotWant{what: what, at: w.now()}
}

// wanted names the changes that wait for the slot, "" when none does.
func (w *slotWants) wanted() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var out []string
	for who, want := range w.wants {
		if now.Sub(want.at) > w.ttl {
			delete(w.wants, who)
			continue
		}
		out = append(out, want.what)
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

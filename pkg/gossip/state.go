package gossip

import (
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// State is a peer's state as this member sees it.
type State string

// States (see the diagram in the package doc).
const (
	Alive   State = "alive"
	Suspect State = "suspect"
	Dead    State = "dead"
	Left    State = "left" // it left gracefully
)

// NodeState is one peer as this member sees it.
type NodeState struct {
	Name  string
	Addr  string // host:port of its gossip
	State State
	Since time.Time // when State last changed, by this member's clock
	Meta  Meta
	// MetaErr is why its metadata did not decode ("" when it did).
	MetaErr string
}

// tracker keeps the peers' states. memberlist calls its Notify methods
// with its own lock held; tracker never calls memberlist.
type tracker struct {
	now     func() time.Time
	onEvent func(NodeState, State) // called without the lock; may be nil

	mu      sync.Mutex
	nodes   map[string]*NodeState
	count   map[State]int // peers by state, kept with nodes (counts is O(1))
	changed chan struct{}
	// refutedAt is when each peer last answered this member as a suspect
	// (see suspectHearsay).
	refutedAt map[string]time.Time
}

func newTracker(now func() time.Time) *tracker {
	return &tracker{now: now, nodes: map[string]*NodeState{}, count: map[State]int{}, changed: make(chan struct{}, 1), refutedAt: map[string]time.Time{}}
}

// set records n in state s, returning the previous state ("" if new).
func (t *tracker) set(n *memberlist.Node, s State, metaToo bool) {
	t.mu.Lock()
	cur, ok := t.nodes[n.Name]
	if !ok {
		cur = &NodeState{Name: n.Name}
		t.nodes[n.Name] = cur
	}
	prev := cur.State
	changed := false
	if prev != s {
		t.move(cur, s)
		changed = true
	}
	cur.Addr = n.Address()
	if metaToo || !ok {
		m, err := DecodeMeta(n.Meta)
		cur.Meta, cur.MetaErr = m, ""
		if err != nil {
			cur.MetaErr = err.Error()
		}
		changed = true
	}
	snap := *cur
	t.mu.Unlock()
	if changed {
		t.notify()
	}
	if prev != s && t.onEvent != nil {
		t.onEvent(snap, prev)
	}
}

// move puts n in state s, now, keeping the counts; t.mu is held.
func (t *tracker) move(n *NodeState, s State) {
	if n.State != "" {
		t.count[n.State]--
	}
	t.count[s]++
	n.State, n.Since = s, t.now()
}

func (t *tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// NotifyJoin implements memberlist.EventDelegate.
func (t *tracker) NotifyJoin(n *memberlist.Node) { t.set(n, Alive, true) }

// NotifyLeave implements memberlist.EventDelegate. memberlist's Node does
// not carry its state here, so a member that announced it is leaving
// (HealthLeaving in its metadata) is recorded left, any other dead.
func (t *tracker) NotifyLeave(n *memberlist.Node) {
	t.mu.Lock()
	cur, ok := t.nodes[n.Name]
	leaving := ok && cur.Meta.Health.Has(HealthLeaving)
	t.mu.Unlock()
	if leaving {
		t.set(n, Left, false)
		return
	}
	t.set(n, Dead, false)
}

// NotifyUpdate implements memberlist.EventDelegate: new metadata means
// the peer is alive.
func (t *tracker) NotifyUpdate(n *memberlist.Node) { t.set(n, Alive, true) }

// suspect records that this member's probe of name failed and memberlist
// started suspecting it (memberlist has no event for suspicion; the mesh
// learns it from memberlist's log line).
func (t *tracker) suspect(name string) bool {
	return t.setState(name, Alive, Suspect)
}

// suspectHearsay records name suspect because another member said so,
// unless name answered this member as a suspect less than grace ago: that
// message is older news, still echoing between members.
func (t *tracker) suspectHearsay(name string, grace time.Duration) bool {
	t.mu.Lock()
	at, ok := t.refutedAt[name]
	t.mu.Unlock()
	if ok && t.now().Sub(at) < grace {
		return false
	}
	return t.suspect(name)
}

// refuted records that a suspect answered again.
func (t *tracker) refuted(name string) {
	if t.setState(name, Suspect, Alive) {
		t.mu.Lock()
		t.refutedAt[name] = t.now()
		t.mu.Unlock()
	}
}

// setState moves name from state from to state to, if it is in from,
// and tells whether it did.
func (t *tracker) setState(name string, from, to State) bool {
	t.mu.Lock()
	cur, ok := t.nodes[name]
	if !ok || cur.State != from {
		t.mu.Unlock()
		return false
	}
	t.move(cur, to)
	snap := *cur
	t.mu.Unlock()
	t.notify()
	if t.onEvent != nil {
		t.onEvent(snap, from)
	}
	return true
}

// counts counts the peers by state, from the counts kept as they change
// (a benchmark reads all 500 members' twice a second: counting the map
// each time was 8% of its CPU).
func (t *tracker) counts() map[State]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[State]int, len(t.count))
	for s, n := range t.count {
		if n > 0 {
			out[s] = n
		}
	}
	return out
}

// inState lists the peers in state s.
func (t *tracker) inState(s State) []NodeState {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []NodeState
	for _, n := range t.nodes {
		if n.State == s {
			out = append(out, *n)
		}
	}
	return out
}

// seedsAlive tells whether each seed (host or host:port) is the address
// of an alive peer. Run asks on every poll: it copies nothing and stops
// at the first peer that completes the set.
func (t *tracker) seedsAlive(seeds []string) bool {
	found := make([]bool, len(seeds))
	left := len(seeds)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if left == 0 {
			break
		}
		if n.State != Alive {
			continue
		}
		host, _, err := net.SplitHostPort(n.Addr)
		for i, s := range seeds {
			if !found[i] && (s == n.Addr || err == nil && s == host) {
				found[i] = true
				left--
			}
		}
	}
	return left == 0
}

// snapshot returns every known peer, by name.
func (t *tracker) snapshot() []NodeState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]NodeState, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *tracker) get(name string) (NodeState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	if !ok {
		return NodeState{}, false
	}
	return *n, true
}

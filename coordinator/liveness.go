package coordinator

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Gossip is the coordinator's view of the mesh (*gossip.Mesh).
type Gossip interface {
	Nodes() []gossip.NodeState
}

// livenessTracker combines the mesh's view of each node with its
// heartbeat lease and the answer of its etcd member
// (membership.CombineLiveness), remembering when each lease was seen to
// come or go, and publishes the result for nicoctl.
//
// Which signal wins: gossip, the fastest, except that a node the mesh
// calls dead (or left) is alive while its etcd member answers the status
// call and its heartbeat lease is live. Both of those reach the node
// through etcd itself, so together they outweigh the mesh's view: a voter
// that lost its mesh (its seeds removed, the gossip port blocked) but
// serves and renews is not counted against quorum nor replaced as dead.
type livenessTracker struct {
	mu        sync.Mutex
	lease     map[string]leaseSeen
	published map[string]membership.Liveness
}

type leaseSeen struct {
	live  bool
	since time.Time
}

func newLivenessTracker() *livenessTracker {
	return &livenessTracker{lease: map[string]leaseSeen{}}
}

// update returns every registered node's liveness at now, from the mesh
// (g, nil: none), the heartbeats (obs.Alive) and the members' answers
// (obs.Members, matched to nodes).
func (l *livenessTracker) update(now time.Time, g Gossip, obs membership.Observed) map[string]membership.Liveness {
	gs := map[string]gossip.NodeState{}
	if g != nil {
		for _, n := range g.Nodes() {
			gs[n.Name] = n
		}
	}
	answers := map[string]bool{}
	for _, m := range obs.Members {
		if m.Node != "" && m.Healthy {
			answers[m.Node] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]membership.Liveness{}
	for _, n := range obs.Nodes {
		name := n.Metadata.Name
		seen, ok := l.lease[name]
		if !ok || seen.live != obs.Alive[name] {
			seen = leaseSeen{live: obs.Alive[name], since: now}
			l.lease[name] = seen
		}
		g := gs[name]
		out[name] = membership.CombineLiveness(membership.Signals{
			Gossip: string(g.State), GossipSince: g.Since,
			LeaseLive: seen.live, LeaseSince: seen.since,
			MemberAnswers: answers[name],
		})
	}
	return out
}

// pending is the write of live when it changed since the last write; nil
// when it did not. Every write is fenced on the leadership term: a deposed
// coordinator's fails with store.ErrNotLeader and leaves the record to the
// new leader. The caller writes it, alone (write) or as the first
// operation of a transaction of its own (liveCarry), and marks it done.
func (l *livenessTracker) pending(leader string, now time.Time, live map[string]membership.Liveness) (*liveCarry, error) {
	l.mu.Lock()
	same := maps.Equal(l.published, live)
	l.mu.Unlock()
	if same {
		return nil, nil
	}
	obj := api.NewLiveness()
	obj.Status = api.LivenessStatus{Nodes: map[string]api.NodeLiveness{}, Leader: leader, UpdatedAt: now}
	for name, v := range live {
		obj.Status.Nodes[name] = api.NodeLiveness{State: string(v.State), Since: v.Since, Reason: v.Reason}
	}
	op, err := store.PutObjectOp(obj)
	if err != nil {
		return nil, err
	}
	return &liveCarry{op: op, l: l, live: live}, nil
}

// liveCarry is a liveness record to write: by itself, or carried as the
// first operation of the transaction that journals a pass's step, when
// that write is the step's first side effect (reconciler.once). Either
// way no step planned from the record is applied before it is written,
// and an observer never reads a change made on its account without it.
type liveCarry struct {
	op   clientv3.Op
	l    *livenessTracker
	live map[string]membership.Liveness
	done bool
}

// write writes the record in a fenced transaction of its own.
func (c *liveCarry) write(ctx context.Context, st *store.Store, fence store.Fence) error {
	if _, err := st.FencedTxn(ctx, fence, nil, c.op); err != nil {
		return fmt.Errorf("coordinator: writing liveness: %w", err)
	}
	c.written()
	return nil
}

// written records that the record is in the store.
func (c *liveCarry) written() {
	c.done = true
	c.l.mu.Lock()
	c.l.published = c.live
	c.l.mu.Unlock()
}

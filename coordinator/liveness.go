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
)

// Gossip is the coordinator's view of the mesh (*gossip.Mesh).
type Gossip interface {
	Nodes() []gossip.NodeState
}

// livenessTracker combines the mesh's view of each node with its
// heartbeat lease (membership.CombineLiveness), remembering when each
// lease was seen to come or go, and publishes the result for nicoctl.
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

// update returns every registered node's liveness at now.
func (l *livenessTracker) update(now time.Time, g Gossip, nodes []*api.Node, alive map[string]bool) map[string]membership.Liveness {
	gs := map[string]gossip.NodeState{}
	if g != nil {
		for _, n := range g.Nodes() {
			gs[n.Name] = n
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]membership.Liveness{}
	for _, n := range nodes {
		name := n.Metadata.Name
		seen, ok := l.lease[name]
		if !ok || seen.live != alive[name] {
			seen = leaseSeen{live: alive[name], since: now}
			l.lease[name] = seen
		}
		g := gs[name]
		out[name] = membership.CombineLiveness(string(g.State), g.Since, seen.live, seen.since)
	}
	return out
}

// publish writes the liveness when it changed since the last write, in a
// transaction fenced on the leadership term: a deposed coordinator's write
// fails with store.ErrNotLeader and leaves the record to the new leader.
func (l *livenessTracker) publish(ctx context.Context, st *store.Store, fence store.Fence, leader string, now time.Time, live map[string]membership.Liveness) error {
	l.mu.Lock()
	same := maps.Equal(l.published, live)
	l.mu.Unlock()
	if same {
		return nil
	}
	obj := api.NewLiveness()
	obj.Status = api.LivenessStatus{Nodes: map[string]api.NodeLiveness{}, Leader: leader, UpdatedAt: now}
	for name, v := range live {
		obj.Status.Nodes[name] = api.NodeLiveness{State: string(v.State), Since: v.Since, Reason: v.Reason}
	}
	op, err := store.PutOp(store.LivenessKey, obj)
	if err != nil {
		return err
	}
	if _, err := st.FencedTxn(ctx, fence, nil, op); err != nil {
		return fmt.Errorf("coordinator: writing liveness: %w", err)
	}
	l.mu.Lock()
	l.published = live
	l.mu.Unlock()
	return nil
}

package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestDeposedLeaderCannotWriteLiveness: the liveness record is written in
// a transaction fenced on the leadership term; once a candidate's session
// is gone and another leads, its write is refused and the record keeps the
// new leader's view.
func TestDeposedLeaderCannotWriteLiveness(t *testing.T) {
	t.Parallel()
	cli := memClient(t, clockwork.NewFakeClock())
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	elect := func(name string) (*concurrency.Session, store.Fence) {
		t.Helper()
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		e := concurrency.NewElection(s, st.Prefix()+store.ElectionPrefix)
		if err := e.Campaign(ctx, name); err != nil {
			t.Fatal(err)
		}
		return s, store.Fence{Key: e.Key(), Rev: e.Rev()}
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	read := func() *api.Liveness {
		t.Helper()
		l := api.NewLiveness()
		if err := st.Get(ctx, store.LivenessKey, l); err != nil {
			t.Fatal(err)
		}
		return l
	}

	sessA, fenceA := elect("c-1")
	oldLeader := newLivenessTracker()
	alive := map[string]membership.Liveness{"n1": {State: membership.LiveAlive, Since: now, Reason: "gossip"}}
	if err := publishLiveness(ctx, oldLeader, st, fenceA, "c-1", now, alive); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	if l := read(); l.Status.Leader != "c-1" || l.Status.Nodes["n1"].State != "alive" {
		t.Fatalf("record %+v", l.Status)
	}

	// c-1's session ends (it is deposed) and c-2 is elected.
	if err := sessA.Close(); err != nil {
		t.Fatal(err)
	}
	sessB, fenceB := elect("c-2")
	defer sessB.Close()
	newLeader := newLivenessTracker()
	suspect := map[string]membership.Liveness{"n1": {State: membership.LiveSuspect, Since: now.Add(time.Second), Reason: "gossip"}}
	if err := publishLiveness(ctx, newLeader, st, fenceB, "c-2", now.Add(time.Second), suspect); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}

	dead := map[string]membership.Liveness{"n1": {State: membership.LiveDead, Since: now.Add(2 * time.Second), Reason: "gossip"}}
	err = publishLiveness(ctx, oldLeader, st, fenceA, "c-1", now.Add(2*time.Second), dead)
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("deposed leader's write: %v, want ErrNotLeader", err)
	}
	if l := read(); l.Status.Leader != "c-2" || l.Status.Nodes["n1"].State != "suspect" {
		t.Fatalf("record after the deposed write: %+v, want c-2's (n1 suspect)", l.Status)
	}
	// The refused write is not taken as published.
	if oldLeader.published["n1"].State != membership.LiveAlive {
		t.Fatalf("deposed leader remembers %+v as published", oldLeader.published)
	}
}

// fakeMesh is the coordinator's mesh view, fixed.
type fakeMesh []gossip.NodeState

func (f fakeMesh) Nodes() []gossip.NodeState { return f }

// TestLivenessOfAVoterOutOfTheMesh: the tracker feeds each node's member
// answer into the rule; a voter the mesh calls dead is alive while its
// member answers and its lease is live, and dead once either goes.
func TestLivenessOfAVoterOutOfTheMesh(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	deadSince := now.Add(-time.Minute)
	mesh := fakeMesh{
		{Name: "cp-1", State: gossip.Alive, Since: deadSince},
		{Name: "cp-2", State: gossip.Dead, Since: deadSince},
	}
	nodes := []*api.Node{api.NewNode("cp-1"), api.NewNode("cp-2")}
	for _, tc := range []struct {
		name   string
		answer bool
		lease  bool
		want   membership.LiveState
	}{
		{"member answers, lease live", true, true, membership.LiveAlive},
		{"member silent, lease live", false, true, membership.LiveDead},
		{"member answers, lease gone", true, false, membership.LiveDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := membership.Observed{
				Nodes:   nodes,
				Alive:   map[string]bool{"cp-1": true, "cp-2": tc.lease},
				Members: []membership.Member{{ID: 1, Node: "cp-1", Healthy: true}, {ID: 2, Node: "cp-2", Healthy: tc.answer}},
			}
			got := newLivenessTracker().update(now, mesh, obs)
			if got["cp-2"].State != tc.want || got["cp-1"].State != membership.LiveAlive {
				t.Fatalf("liveness %+v, want cp-2 %s and cp-1 alive", got, tc.want)
			}
		})
	}
}

// publishLiveness writes live as the reconciler does, when it changed.
func publishLiveness(ctx context.Context, l *livenessTracker, st *store.Store, fence store.Fence, leader string, now time.Time, live map[string]membership.Liveness) error {
	c, err := l.pending(leader, now, live)
	if err != nil || c == nil {
		return err
	}
	return c.write(ctx, st, fence)
}

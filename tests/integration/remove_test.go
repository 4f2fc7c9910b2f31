package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
)

// TestRemovingTheEtcdLeaderMovesLeadershipFirst: the node whose member leads
// etcd is removed; the leader moves leadership to another voter, and only
// then removes the member. The removed agent wipes its data and stops.
func TestRemovingTheEtcdLeaderMovesLeadershipFirst(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	cli := f.Client()
	removedWhileLeading := make(chan string, 1)
	f.StartCoordinator("c-1", func(c *coord) {
		c.Observer.OnMembershipStep = func(s membership.Step) {
			if s.Action != membership.RemoveMember {
				return
			}
			// The invariant: the member removed is not the etcd leader.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if st, err := cli.Status(ctx, f.Endpoints()[0]); err == nil && st.Leader == uint64(s.Member) {
				removedWhileLeading <- s.Member.String()
			}
		}
	})
	f.Start(f.AgentConfig("cp-2", false))
	f.Start(f.AgentConfig("cp-3", false))
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")

	leader := f.EtcdLeader()
	f.requestRemoval(leader, false)
	waitObj[api.RemoveRequest](f, 60*time.Second, store.RemovalKey(leader), "removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
	select {
	case id := <-removedWhileLeading:
		t.Fatalf("member %s was removed while it led etcd", id)
	default:
	}
	var rest []string
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if n != leader {
			rest = append(rest, n)
		}
	}
	f.WaitVoters(30*time.Second, rest...)
	op := f.ops()[len(f.ops())-1]
	var moved, removed int
	for i, e := range op.Status.History {
		if strings.Contains(e.Message, "moved etcd leadership") {
			moved = i + 1
		}
		if strings.Contains(e.Message, "removing member") {
			removed = i + 1
		}
	}
	if moved == 0 || removed == 0 || moved > removed {
		t.Fatalf("history does not show a leader move before the removal: %+v", op.Status.History)
	}
	select {
	case err := <-f.Node(leader).Done:
		if !errors.Is(err, agent.ErrRemoved) {
			t.Fatalf("removed agent returned %v, want ErrRemoved", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("removed agent did not stop")
	}
	f.Node(leader).Done <- agent.ErrRemoved
}

// TestRemovalThatLosesQuorumIsRefused: with one of three members down,
// removing a healthy one would leave one healthy voter of two; the leader
// refuses and says why, and no member is removed. Forced, it goes through.
func TestRemovalThatLosesQuorumIsRefused(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	n3 := f.Grow("c-1", "cp-1", "cp-2", "cp-3")[2]
	_ = n3.Stop()

	f.requestRemoval("cp-2", false)
	r := waitObj[api.RemoveRequest](f, 60*time.Second, store.RemovalKey("cp-2"), "removal answered", func(r *api.RemoveRequest) bool { return r.Status.Phase.Finished() })
	if r.Status.Phase != api.RemoveRefused || !strings.Contains(r.Status.Message, "cp-3 is unhealthy") || !strings.Contains(r.Status.Message, "quorum") {
		t.Fatalf("removal %s: %q; want Refused naming the unhealthy cp-3 and quorum", r.Status.Phase, r.Status.Message)
	}
	ms, err := fleetkit.Members(t.Context(), f.Client())
	if err != nil || len(ms) != 3 {
		t.Fatalf("members after refusal: %v %v", ms, err)
	}
	// The last member is never removed, even by force.
	f.requestRemoval("ghost", true)
	r = waitObj[api.RemoveRequest](f, 30*time.Second, store.RemovalKey("ghost"), "unknown node refused", func(r *api.RemoveRequest) bool { return r.Status.Phase.Finished() })
	if r.Status.Phase != api.RemoveRefused || !strings.Contains(r.Status.Message, `no node or member named "ghost"`) {
		t.Fatalf("unknown node: %s %q", r.Status.Phase, r.Status.Message)
	}
}

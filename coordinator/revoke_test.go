package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

func node(name string, phase api.NodePhase, updated time.Time) *api.Node {
	n := api.NewNode(name)
	n.Status.Phase, n.Status.UpdatedAt = phase, updated
	return n
}

func TestIdentitiesToRevoke(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	after := 10 * time.Minute
	rr := func(node string, phase api.RemovePhase, done time.Time, revoked time.Time) *api.RemoveRequest {
		r := api.NewRemoveRequest(node)
		r.Status = api.RemoveRequestStatus{Phase: phase, UpdatedAt: done, IdentityRevokedAt: revoked}
		return r
	}
	var zero time.Time
	for _, c := range []struct {
		name  string
		r     *api.RemoveRequest
		alive bool
		want  bool
		nodes []*api.Node
	}{
		{"done, heartbeat gone: revoke", rr("w-1", api.RemoveDone, now, zero), false, true, nil},
		{"done, agent still leaving: wait", rr("w-1", api.RemoveDone, now.Add(-time.Minute), zero), true, false, nil},
		{"done long ago, agent never let go: revoke", rr("w-1", api.RemoveDone, now.Add(-after), zero), true, true, nil},
		{"already revoked", rr("w-1", api.RemoveDone, now.Add(-time.Hour), now.Add(-50*time.Minute)), false, false, nil},
		{"pending", rr("w-1", api.RemovePending, zero, zero), false, false, nil},
		{"running", rr("w-1", api.RemoveRunning, now.Add(-time.Hour), zero), false, false, nil},
		{"refused: the node stays", rr("w-1", api.RemoveRefused, now.Add(-time.Hour), zero), false, false, nil},
		{"failed: the node stays", rr("w-1", api.RemoveFailed, now.Add(-time.Hour), zero), false, false, nil},
		{"node marked removed after Done: revoke", rr("w-1", api.RemoveDone, now.Add(-time.Minute), zero), false, true, []*api.Node{node("w-1", api.NodeRemoved, now)}},
		{"node registered again since Done: leave it", rr("w-1", api.RemoveDone, now.Add(-time.Minute), zero), false, false, []*api.Node{node("w-1", api.NodeJoining, now)}},
		{"node record older than Done: revoke", rr("w-1", api.RemoveDone, now.Add(-time.Minute), zero), false, true, []*api.Node{node("w-1", api.NodeRegistered, now.Add(-time.Hour))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := IdentitiesToRevoke([]*api.RemoveRequest{c.r}, c.nodes, map[string]bool{"w-1": c.alive}, now, after)
			if (len(got) == 1) != c.want {
				t.Fatalf("got %d removals to revoke, want revoke=%v", len(got), c.want)
			}
		})
	}
}

package integration

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestWorkerRegistersAndLeaves: a worker runs no member; it registers under
// a heartbeat lease, becomes ready, and when removed it stops with
// ErrRemoved and its heartbeat is gone.
func TestWorkerRegistersAndLeaves(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	cfg := f.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	n := f.Start(cfg)
	testwait.For(t, 30*time.Second, "worker ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	node := waitObj[api.Node](f, 10*time.Second, store.NodeKey("w-1"), "worker registered", func(n *api.Node) bool {
		return n.Status.Phase == api.NodeRegistered && n.Status.UpdatedAt.After(n.Metadata.CreatedAt)
	})
	if node.Spec.PeerURL != "" || node.Status.MemberID != 0 {
		t.Fatalf("worker has member fields: %+v", node)
	}
	f.WaitVoters(5*time.Second, "cp-1") // no member was added for it

	f.requestRemoval("w-1", false)
	n.WaitRemoved(t, 30*time.Second, "removed worker did not stop")
	resp, err := f.Client().Get(t.Context(), store.DefaultPrefix+store.HeartbeatKey("w-1"))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("heartbeat of removed worker: %v %v", resp, err)
	}
	waitObj[api.Node](f, 10*time.Second, store.NodeKey("w-1"), "worker marked removed", func(n *api.Node) bool { return n.Status.Phase == api.NodeRemoved })
}

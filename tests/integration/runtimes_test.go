package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// TestMemberRuntimes runs the whole flow on the embedded runtime and on
// the etcd binary of each available minor version as a child process:
// bootstrap, two joins, then the removal of the etcd leader.
func TestMemberRuntimes(t *testing.T) {
	t.Parallel()
	for name, makeFleet := range runtimeFleets(t) {
		t.Run(name, func(t *testing.T) {
			f := makeFleet(t)
			f.Grow("c-1", "cp-1", "cp-2", "cp-3")

			leader := f.EtcdLeader()
			f.requestRemoval(leader, false)
			waitObj[api.RemoveRequest](f, 90*time.Second, store.RemovalKey(leader), "removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
			select {
			case err := <-f.Node(leader).Done:
				f.Node(leader).Done <- err
				if !errors.Is(err, agent.ErrRemoved) {
					t.Fatalf("removed agent returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("removed agent did not stop")
			}
		})
	}
}

package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// TestExecRuntime runs the whole flow with real etcd binaries of each
// available minor version as child processes: bootstrap, two joins, then the
// removal of the etcd leader.
func TestExecRuntime(t *testing.T) {
	t.Parallel()
	for _, bin := range etcdtest.Binaries(t) {
		t.Run("etcd-"+bin.Version, func(t *testing.T) {
			f := newFleet(t)
			f.NewRuntime = func() member.Runtime { return member.NewExec(bin.Path) }
			f.Grow("c-1", "cp-1", "cp-2", "cp-3")

			leader := f.EtcdLeader()
			f.requestRemoval(leader, false)
			waitObj[api.RemoveRequest](f, 60*time.Second, store.RemovalKey(leader), "removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
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

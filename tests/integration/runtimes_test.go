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

// TestMemberRuntimes runs the whole flow on the embedded runtime and on
// the etcd binary of each available minor version as a child process:
// bootstrap, two joins, then the removal of the etcd leader.
func TestMemberRuntimes(t *testing.T) {
	t.Parallel()
	runtimes := map[string]func() member.Runtime{"embedded": embeddedRuntime}
	for _, bin := range etcdtest.Binaries(t) {
		runtimes["etcd-"+bin.Version] = func() member.Runtime { return member.NewExec(bin.Path) }
	}
	for name, rt := range runtimes {
		t.Run(name, func(t *testing.T) {
			f := newFleet(t)
			f.NewRuntime = rt
			if name == "embedded" {
				f.CoordSession = embeddedCoordSession
			}
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

package integration

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRemovedNodeFinishesItsRemovalWhilePolled: a voter is removed while
// clients keep asking its member for its Status every 2 ms, as monitoring
// does. Such a call can panic the member inside the agent's process
// (etcd's IsLearner after the member left its own membership, or
// StorageVersion on the closed backend), which would leave the data dir,
// the node record and the exit code as they were. The agent must return
// ErrRemoved, with its data dir wiped (the copy kept), the node recorded
// as removed and its heartbeat gone; started again at once, it joins anew.
// Embedded members (the panic is the embedded runtime's) and the newest
// etcd binary, whose agent finishes leaving sooner: started again, it
// finds the leader still finishing the removal, and waits for it.
func TestRemovedNodeFinishesItsRemovalWhilePolled(t *testing.T) {
	t.Parallel()
	for name, makeFleet := range map[string]func(*testing.T) *fleet{
		"embedded": newInProcessFleet,
		"binary":   newFleet,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			removedWhilePolled(t, makeFleet(t))
		})
	}
}

func removedWhilePolled(t *testing.T, f *fleet) {
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	cfg2 := f.AgentConfig("cp-2", false)
	n2 := f.Start(cfg2)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2")

	pctx, stopPolls := context.WithCancel(context.Background())
	var answered atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		// One connection per poller, to cp-2 only: Maintenance.Status on
		// it, without the per-call dial of clientv3's Status.
		cli := etcdtest.Dial(t, pki.RootIdentity, 0, cfg2.ClientURL)
		mc := pb.NewMaintenanceClient(cli.ActiveConnection())
		wg.Go(func() {
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				sctx, cancel := context.WithTimeout(pctx, time.Second)
				if _, err := mc.Status(sctx, &pb.StatusRequest{}); err == nil {
					answered.Add(1)
				}
				cancel()
			}
		})
	}
	defer func() { stopPolls(); wg.Wait() }()
	testwait.For(t, 30*time.Second, "pollers answered", func() (bool, string) { return answered.Load() > 0, "no answer yet" })

	f.requestRemoval("cp-2", false)
	n2.WaitRemoved(t, 90*time.Second, "removed cp-2 did not stop")
	stopPolls()
	wg.Wait()
	t.Logf("%d Status calls answered by cp-2", answered.Load())

	if has, err := member.HasData(cfg2.DataDir); err != nil || has {
		t.Fatalf("cp-2's data dir after its removal: has data %v, %v; want wiped", has, err)
	}
	if copies, _ := filepath.Glob(cfg2.DataDir + ".wiped-*"); len(copies) != 1 {
		t.Fatalf("copies of cp-2's wiped data dir: %v, want one", copies)
	}
	node := &api.Node{}
	if err := f.Store().Get(t.Context(), store.NodeKey("cp-2"), node); err != nil || node.Status.Phase != api.NodeRemoved || node.Status.MemberState != api.MemberNone {
		t.Fatalf("cp-2's node record: %s/%s (%v), want %s/%s", node.Status.Phase, node.Status.MemberState, err, api.NodeRemoved, api.MemberNone)
	}
	resp, err := f.Client().Get(t.Context(), store.DefaultPrefix+store.HeartbeatKey("cp-2"))
	if err != nil || resp.Count != 0 {
		t.Fatalf("cp-2's heartbeat key: %d (%v), want gone", resp.Count, err)
	}

	// Started again, the node clears its finished removal and joins anew.
	f.Start(cfg2)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2")
}

package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/internal/defrag"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestStaleDefragSlotReleased: a Defrag operation a previous term left
// holding the slot keeps it while its member is still fragmented and the
// call's timeout has not passed, and is released (journaled) once it has;
// one whose member left is released at once.
func TestStaleDefragSlotReleased(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st := dialStore(t, cl)
	ctx := t.Context()
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Policy.DefragFragmentation = 0.5
	ec.Spec.Policy.DefragMinDBSize = 1 << 40 // never due here: only the stale slot is at stake
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	fragment(t, cl.Client(t), 32) // 2 MiB written, then freed
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, fence := leaderTerm(t, st, "b", withClock(clockAt(&now)))
	// etcd reports the freed pages from the backend's next commit (every
	// 100 ms while there are writes; later on a loaded machine): write,
	// and wait until the status shows them.
	var ms []etcdadmin.MemberStatus
	testwait.For(t, 20*time.Second, "the member's status to show the freed pages", func() (bool, string) {
		if _, err := cl.Client(t).Put(ctx, "/frag-commit", "x"); err != nil {
			return false, err.Error()
		}
		var err error
		if ms, err = c.admin.Statuses(ctx); err != nil || len(ms) != 1 {
			return false, fmt.Sprintf("%v %v", ms, err)
		}
		f := defrag.Fragmentation(ms[0])
		return f >= ec.Spec.Policy.DefragFragmentation, fmt.Sprintf("fragmentation %.2f", f)
	})
	leave := func(name string, id api.MemberID) {
		t.Helper()
		op := api.NewOperation(name)
		op.Spec = api.OperationSpec{Type: api.OpDefrag, MemberID: id, StartedBy: "a"}
		op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepDefragment, StepSince: now, Leader: "a"}
		if err := st.Put(ctx, store.OpKey(name), op); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Client().Put(ctx, store.ActiveOpKey, name); err != nil {
			t.Fatal(err)
		}
	}
	s := testEtcdStatuser(c, fence)
	outcome := func(name string) *api.Operation {
		t.Helper()
		if err := s.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		op := &api.Operation{}
		if err := st.Get(ctx, store.OpKey(name), op); err != nil {
			t.Fatal(err)
		}
		return op
	}
	active := func() string {
		resp, err := st.Client().Get(ctx, store.ActiveOpKey, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			return ""
		}
		r, _ := st.Client().Get(ctx, store.ActiveOpKey)
		return string(r.Kvs[0].Value)
	}

	leave("defrag-1", ms[0].ID)
	if op := outcome("defrag-1"); op.Status.Phase != api.OpRunning || active() != "defrag-1" {
		t.Fatalf("released before its timeout while its member is fragmented: %s, active %q", op.Status.Phase, active())
	}
	now = now.Add(defragTimeout)
	if op := outcome("defrag-1"); op.Status.Phase != api.OpSucceeded || active() != "" {
		t.Fatalf("not released after the timeout: %s %q, active %q", op.Status.Phase, op.Status.Message, active())
	}

	leave("defrag-2", 0x1234)
	if op := outcome("defrag-2"); op.Status.Phase != api.OpSucceeded || active() != "" || op.Status.Message != "released by b after a change of leader: the member left" {
		t.Fatalf("a slot whose member left: %s %q, active %q", op.Status.Phase, op.Status.Message, active())
	}
}

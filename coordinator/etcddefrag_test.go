package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/internal/defrag"
	"github.com/homystack/nico/coordinator/internal/etcdstatus"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// recordingAdmin passes every call to the real Admin and records the
// Defragment calls: how many ran at once, in which order, and what held
// the active-op slot meanwhile.
type recordingAdmin struct {
	maintenanceAdmin
	st *store.Store

	mu       sync.Mutex
	inFlight int
	maxAtOne int
	order    []string // client URLs, in call order
	leaders  []api.MemberID
	slot     []string // the active operation's type during each call
}

func (r *recordingAdmin) Defragment(ctx context.Context, url string, timeout time.Duration) error {
	ms, _ := r.maintenanceAdmin.Statuses(ctx)
	var slot string
	if op, err := r.st.ActiveOp(ctx); err == nil && op != nil {
		slot = string(op.Spec.Type)
	}
	r.mu.Lock()
	r.inFlight++
	r.maxAtOne = max(r.maxAtOne, r.inFlight)
	r.order = append(r.order, url)
	r.slot = append(r.slot, slot)
	r.leaders = append(r.leaders, etcdstatus.LeaderOf(ms))
	r.mu.Unlock()
	err := r.maintenanceAdmin.Defragment(ctx, url, timeout)
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
	return err
}

func (r *recordingAdmin) calls() ([]string, []api.MemberID, []string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...), append([]api.MemberID(nil), r.leaders...), append([]string(nil), r.slot...), r.maxAtOne
}

// fragment writes and deletes large values and compacts, so that every
// member's database keeps its size with most of it free.
func fragment(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	ctx := t.Context()
	val := strings.Repeat("x", 64<<10)
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/frag/%04d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// TestDefragOneAtATimeLeaderLast: on three real members fragmented beyond
// the policy, the leader's etcd-status controller defragments each member
// once, never two at once, each while holding the active-op slot as a
// Defrag operation, the etcd leader last; status then shows every member
// with its role and database sizes, and the slot is free.
func TestDefragOneAtATimeLeaderLast(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 3)
	st := dialStore(t, cl)
	ctx := t.Context()
	for i, m := range cl.Members {
		putNode(t, st, fmt.Sprintf("cp-%d", i+1), m.PeerURL)
	}
	putNode(t, st, "cp-4", "https://127.0.0.9:2380") // a standby
	ec := api.NewEtcdCluster()
	ec.Spec.Policy.DefragFragmentation = 0.5
	ec.Spec.Policy.DefragMinDBSize = 4 << 20
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	fragment(t, cl.Client(t), 160) // 10 MiB written, then freed
	// Each member compacts on its own time, and bbolt counts the pages a
	// compaction freed as free only from a later commit on (hence the
	// writes): start once all three are fragmented, so that all are due
	// at once and the order is the plan's.
	frag := cl.Client(t)
	probe := etcdadmin.New(frag, time.Second)
	defer probe.Close()
	testwait.For(t, 30*time.Second, "every member fragmented", func() (bool, string) {
		if _, err := frag.Put(ctx, "/frag-commit", "x"); err != nil {
			return false, err.Error()
		}
		ms, err := probe.Statuses(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms {
			if defrag.Fragmentation(m) < 0.9 {
				return false, fmt.Sprintf("%s: %d of %d bytes in use", m.Name, m.DBSizeInUse, m.DBSize)
			}
		}
		return true, ""
	})

	var rec *recordingAdmin
	c := newCoordinator(Config{Name: "a", SessionTTL: 60 * time.Second, ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second}, st, slog.New(slog.DiscardHandler),
		func(a maintenanceAdmin) maintenanceAdmin {
			rec = &recordingAdmin{maintenanceAdmin: a, st: st}
			return rec
		})
	defer runInBackground(t, c)()

	testwait.For(t, 60*time.Second, "three defragmentations and a status with small databases", func() (bool, string) {
		order, _, _, _ := rec.calls()
		got := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			return false, err.Error()
		}
		if len(order) < 3 {
			return false, fmt.Sprintf("defragmented %v", order)
		}
		for _, m := range got.Status.Members {
			if m.Role == api.RoleVoter && m.DBSize > 4<<20 {
				return false, fmt.Sprintf("%s still %d bytes", m.Name, m.DBSize)
			}
		}
		return true, ""
	})
	order, leaders, slots, most := rec.calls()
	if most != 1 {
		t.Errorf("%d defragmentations ran at once", most)
	}
	if len(order) != 3 {
		t.Errorf("defragmented %v, want each member once", order)
	}
	seen := map[string]bool{}
	for _, u := range order {
		if seen[u] {
			t.Errorf("%s defragmented twice: %v", u, order)
		}
		seen[u] = true
	}
	for i, s := range slots {
		if s != string(api.OpDefrag) {
			t.Errorf("call %d ran with the slot held by %q, want %q", i, s, api.OpDefrag)
		}
	}
	// The leader last: the last call went to the member that led then.
	ms, err := rec.maintenanceAdmin.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	urlOf := map[api.MemberID]string{}
	for _, m := range ms {
		urlOf[m.ID] = m.ClientURLs[0]
	}
	t.Logf("defragmented %v; leaders then %v; members %v", order, leaders, urlOf)
	if len(leaders) == len(order) && len(order) > 0 {
		last := len(order) - 1
		if order[last] != urlOf[leaders[last]] {
			t.Errorf("last defragmented %s, the leader was %s", order[last], urlOf[leaders[last]])
		}
		for i := 0; i < last; i++ {
			if order[i] == urlOf[leaders[i]] {
				t.Errorf("call %d defragmented the leader %s before a follower", i, order[i])
			}
		}
	} else {
		t.Errorf("leaders seen %v for calls %v", leaders, order)
	}

	testwait.For(t, 20*time.Second, "the slot free and status with roles and sizes", func() (bool, string) {
		if op, err := st.ActiveOp(ctx); err != nil || op != nil {
			return false, fmt.Sprintf("active op %v %v", op, err)
		}
		got := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			return false, err.Error()
		}
		roles := map[string]int{}
		for _, m := range got.Status.Members {
			roles[m.Role]++
			if m.Role == api.RoleVoter && (m.DBSize == 0 || m.DBSizeInUse == 0 || !m.Healthy) {
				return false, fmt.Sprintf("voter %+v", m)
			}
		}
		if roles[api.RoleVoter] != 3 || roles[api.RoleStandby] != 1 || got.Status.FaultTolerance != 1 || got.Status.Leader == "" {
			return false, fmt.Sprintf("status %+v", got.Status)
		}
		for _, m := range got.Status.Members {
			t.Logf("status: %s %s db %d in use %d leader %v", m.Name, m.Role, m.DBSize, m.DBSizeInUse, m.Leader)
		}
		return true, ""
	})
	ops, _, err := store.List[api.Operation](ctx, st, store.OpsDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range ops {
		if op.Spec.Type == api.OpDefrag {
			t.Logf("%s: %s", op.Metadata.Name, op.Status.Message)
			n++
			if op.Status.Phase != api.OpSucceeded {
				t.Errorf("%s: %s %s", op.Metadata.Name, op.Status.Phase, op.Status.Message)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d defrag operations journaled, want 3", n)
	}
}

var _ maintenanceAdmin = (*recordingAdmin)(nil)

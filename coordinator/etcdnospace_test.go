package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// disarmRecorder records, for each NOSPACE disarm, the member's database
// size and quota at that moment, and the defragmentations before it.
type disarmRecorder struct {
	maintenanceAdmin
	mu       sync.Mutex
	defrags  int
	disarms  []string
	disarmed int
	calls    []string // "defrag" and "disarm", in order
}

func (r *disarmRecorder) Defragment(ctx context.Context, url string, timeout time.Duration) error {
	err := r.maintenanceAdmin.Defragment(ctx, url, timeout)
	r.mu.Lock()
	if err == nil {
		r.defrags++
		r.calls = append(r.calls, "defrag")
	}
	r.mu.Unlock()
	return err
}

func (r *disarmRecorder) DisarmNoSpace(ctx context.Context, id api.MemberID) error {
	ms, _ := r.maintenanceAdmin.Statuses(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, "disarm")
	for _, m := range ms {
		if m.ID == id {
			r.disarms = append(r.disarms, fmt.Sprintf("size %d quota %d after %d defrags", m.DBSize, m.DBSizeQuota, r.defrags))
			if r.defrags == 0 || m.DBSize >= m.DBSizeQuota {
				r.disarmed++ // too early: counted as a failure below
			}
		}
	}
	r.mu.Unlock()
	return r.maintenanceAdmin.DisarmNoSpace(ctx, id)
}

// TestNoSpaceDisarmedAfterDefrag: a member past its quota raises NOSPACE
// and the cluster refuses writes; once the space is freed (deleted and
// compacted) the leader defragments it, though it cannot journal the slot,
// and disarms NOSPACE only then, below the quota, once, and defragments no
// more; writes work again and status shows no alarm.
func TestNoSpaceDisarmedAfterDefrag(t *testing.T) {
	t.Parallel()
	const quota = 6 << 20
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: etcdtest.TLSDefault, QuotaBackendBytes: quota})
	st := dialStore(t, cl)
	ctx := t.Context()
	putNode(t, st, "cp-1", cl.Members[0].PeerURL)
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Policy.DefragFragmentation = 0.5
	ec.Spec.Policy.DefragMinDBSize = 1 << 20
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	var rec *disarmRecorder
	c := newCoordinator(Config{Name: "a", SessionTTL: 60 * time.Second, ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second}, st, slog.New(slog.DiscardHandler),
		func(a maintenanceAdmin) maintenanceAdmin { rec = &disarmRecorder{maintenanceAdmin: a}; return rec })
	defer runInBackground(t, c)()
	// Elected before the quota is reached: under NOSPACE no candidate can
	// take a session lease, so only a sitting leader can reclaim space.
	testwait.For(t, 20*time.Second, "the first status", func() (bool, string) {
		got := &api.EtcdCluster{}
		err := st.Get(ctx, store.EtcdClusterKey, got)
		return err == nil && !got.Status.UpdatedAt.IsZero(), fmt.Sprint(err)
	})
	cli := cl.Client(t)
	fillToNoSpace(t, cli, 400, func(i int) string { return fmt.Sprintf("/fill/%04d", i) })
	resp, err := cli.Delete(ctx, "/fill/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// The leader reclaims under NOSPACE by compacting at the current
	// revision itself; either compaction leaves the deleted history gone.
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/probe", "1"); !etcdadmin.NoSpace(err) {
		t.Fatalf("a write before the disarm: %v, want NOSPACE", err)
	}

	testwait.For(t, 60*time.Second, "NOSPACE disarmed and status without alarms", func() (bool, string) {
		alarms, err := cli.AlarmList(ctx)
		if err != nil || len(alarms.Alarms) > 0 {
			return false, fmt.Sprintf("alarms %v %v", alarms, err)
		}
		got := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			return false, err.Error()
		}
		return len(got.Status.Alarms) == 0 && len(got.Status.Members) == 1 && got.Status.Members[0].Healthy, fmt.Sprintf("status %+v", got.Status)
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// One defragmentation may come too early (the alarm seen before the
	// space was freed: it reclaims nothing and disarms nothing); none comes
	// after the disarm (the disarmed alarm does not call for another).
	if n := len(rec.calls); n == 0 || rec.calls[n-1] != "disarm" {
		t.Errorf("calls %v: want the disarm last", rec.calls)
	}
	if len(rec.disarms) != 1 || rec.disarmed != 0 {
		t.Errorf("disarms %v: want one, after a defragmentation, below the quota", rec.disarms)
	}
	if _, err := cli.Put(ctx, "/probe", "1"); err != nil {
		t.Errorf("a write after the disarm: %v", err)
	}
}

// fillToNoSpace writes values of 64 KiB at key(0), key(1) ... until etcd
// answers NOSPACE; the test fails on another error, or when tries writes
// did not reach the quota.
func fillToNoSpace(t *testing.T, cli *clientv3.Client, tries int, key func(i int) string) {
	t.Helper()
	val := strings.Repeat("x", 64<<10)
	for i := range tries {
		_, err := cli.Put(t.Context(), key(i), val)
		switch {
		case etcdadmin.NoSpace(err):
			return
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Fatal("the quota was never reached")
}

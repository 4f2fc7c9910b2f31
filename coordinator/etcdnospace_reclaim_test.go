package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/metrics/metricstest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// compactRecorder counts the leader's compactions besides what
// disarmRecorder records.
type compactRecorder struct {
	*disarmRecorder
	compactions atomic.Int32
}

func (r *compactRecorder) CompactHistory(ctx context.Context) (int64, error) {
	rev, err := r.disarmRecorder.maintenanceAdmin.CompactHistory(ctx)
	if err == nil {
		r.compactions.Add(1)
		r.mu.Lock()
		r.calls = append(r.calls, "compact")
		r.mu.Unlock()
	}
	return rev, err
}

// gather is one gathering of reg, by family name.
func gather(t *testing.T, reg *metrics.Registry) metricstest.Families {
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	f := metricstest.Families{}
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	return f
}

// TestNoSpaceReclaimedByTheLeader: a member whose database passed its
// quota through history alone (a few keys overwritten) raises NOSPACE and
// the cluster refuses writes. With defragmentation off in the policy and
// nobody compacting by hand, the leader reports it (nico_etcd_alarm),
// compacts the history, defragments, and disarms the alarm only then,
// below the quota; writes work again, the status records the episode and
// the alarm series is gone.
func TestNoSpaceReclaimedByTheLeader(t *testing.T) {
	t.Parallel()
	const quota = 6 << 20
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: etcdtest.TLSDefault, QuotaBackendBytes: quota})
	st := dialStore(t, cl)
	ctx := t.Context()
	putNode(t, st, "cp-1", cl.Members[0].PeerURL)
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Policy.QuotaBackendBytes = quota
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	var rec *compactRecorder
	c := newCoordinator(Config{Name: "a", SessionTTL: 60 * time.Second, ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second}, st, slog.New(slog.DiscardHandler),
		func(a maintenanceAdmin) maintenanceAdmin {
			rec = &compactRecorder{disarmRecorder: &disarmRecorder{maintenanceAdmin: a}}
			return rec
		})
	reg := metrics.NewRegistry()
	c.Metrics = metrics.NewCoordinator(reg)
	defer runInBackground(t, c)()
	testwait.For(t, 20*time.Second, "the first status", func() (bool, string) {
		got := &api.EtcdCluster{}
		err := st.Get(ctx, store.EtcdClusterKey, got)
		return err == nil && !got.Status.UpdatedAt.IsZero(), fmt.Sprint(err)
	})
	cli := cl.Client(t)
	fillToNoSpace(t, cli, 2000, func(i int) string { return fmt.Sprintf("/history/%d", i%4) })
	// The alarm is exported while raised; the status cannot be written.
	seen := false
	testwait.For(t, 60*time.Second, "NOSPACE disarmed", func() (bool, string) {
		if v, ok := gather(t, reg).Value("nico_etcd_alarm", "member", "cp-1", "type", "NOSPACE"); ok && v == 1 {
			seen = true
		}
		alarms, err := cli.AlarmList(ctx)
		return err == nil && len(alarms.Alarms) == 0, fmt.Sprintf("alarms %v %v", alarms, err)
	})
	if _, err := cli.Put(ctx, "/probe", "1"); err != nil {
		t.Fatalf("a write after the disarm: %v", err)
	}
	rec.mu.Lock()
	calls, disarms, early := rec.calls, rec.disarms, rec.disarmed
	rec.mu.Unlock()
	t.Logf("calls %v, disarms %v", calls, disarms)
	if rec.compactions.Load() == 0 {
		t.Errorf("calls %v: no compaction", calls)
	}
	if len(disarms) != 1 || early != 0 {
		t.Errorf("disarms %v: want one, after a defragmentation, below the quota", disarms)
	}
	if n := len(calls); n < 3 || calls[n-1] != "disarm" || calls[0] != "compact" {
		t.Errorf("calls %v: want a compaction first and the disarm last", calls)
	}
	testwait.For(t, 20*time.Second, "the episode in status, the alarm series gone", func() (bool, string) {
		got := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			return false, err.Error()
		}
		ep := got.Status.NoSpace
		_, alarmed := gather(t, reg).Value("nico_etcd_alarm", "type", "NOSPACE")
		return ep != nil && !ep.DisarmedAt.IsZero() && ep.DBSizeAfter < quota && ep.DBSizeQuota == quota && ep.CompactedAt > 0 &&
				len(ep.Members) == 1 && ep.Members[0] == "cp-1" && len(got.Status.Alarms) == 0 && !alarmed,
			fmt.Sprintf("episode %+v, alarms %v, alarm series %v", ep, got.Status.Alarms, alarmed)
	})
	if !seen {
		t.Error("nico_etcd_alarm{member=cp-1,type=NOSPACE} was never 1 while the alarm was raised")
	}
	if v, ok := gather(t, reg).Value("nico_etcd_db_quota_bytes", "member", "cp-1"); !ok || v != quota {
		t.Errorf("nico_etcd_db_quota_bytes = %v, %v; want %d", v, ok, quota)
	}
}

package agent

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe/kubeprobetest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestComponentReportWrittenOnChange: a round that finds what the written
// report says writes nothing; a change, a new heartbeat lease and
// ReportRefresh each write the report again; the report stays fresh
// between the writes, and is bound to the heartbeat's lease.
func TestComponentReportWrittenOnChange(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	var broken atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := kubeprobetest.NewServer(t, mux)
	const interval = 10 * time.Second
	now := time.Unix(1_700_000_000, 0).UTC()
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker},
		ComponentProbes: ComponentProbeConfig{Interval: time.Second, ClusterCA: srv.CAFile(t), Kubeconfig: filepath.Join(t.TempDir(), "absent.conf")}},
		nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	a.Now = func() time.Time { return now }
	setLease := func() clientv3.LeaseID {
		t.Helper()
		g, err := st.Client().Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		a.rec.setLease(int64(g.ID))
		return g.ID
	}
	lease := setLease()

	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Probes = api.ClusterProbes{
		APIServer:         &api.ComponentProbe{URL: srv.URL + "/readyz"},
		ControllerManager: &api.ComponentProbe{Disabled: true},
		Scheduler:         &api.ComponentProbe{Disabled: true},
		Interval:          api.Duration(interval),
	}
	kc.Status.ControlPlane.Machines = []string{"cp-1"}
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.ClusterClaimKey("cp-1"), "k1"); err != nil {
		t.Fatal(err)
	}
	ctrl := a.componentProbes()
	// round runs the controller at now and returns the report and the
	// revision it was written at.
	round := func() (*api.ComponentReport, int64) {
		t.Helper()
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r := api.NewComponentReport("cp-1")
		if err := st.Get(ctx, store.ComponentReportKey("cp-1"), r); err != nil {
			t.Fatalf("no report at %s: %v", now, err)
		}
		if !r.Fresh("k1", now, interval) {
			t.Fatalf("report stale at %s: %+v", now, r.Status)
		}
		return r, r.Metadata.Revision
	}
	onLease := func(want clientv3.LeaseID) {
		t.Helper()
		kv, err := st.GetKV(ctx, store.ComponentReportKey("cp-1"))
		if err != nil || kv.Lease != int64(want) {
			t.Fatalf("report on lease %x (%v), want %x", kv.GetLease(), err, want)
		}
	}

	r, rev := round()
	onLease(lease)
	if want := now.Add(ReportRefresh + 3*interval); !r.Status.FreshUntil.Equal(want) {
		t.Fatalf("fresh until %s, want %s", r.Status.FreshUntil, want)
	}
	// Unchanged rounds write nothing.
	for range 3 {
		now = now.Add(interval)
		if _, again := round(); again != rev {
			t.Fatalf("an unchanged round rewrote the report (revision %d, then %d)", rev, again)
		}
	}
	// A change is written at its round.
	broken.Store(true)
	now = now.Add(interval)
	r, again := round()
	if again == rev || r.Component(api.ComponentAPIServer).Healthy || !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("the API server's failure not written: %+v (revision %d, then %d)", r.Status, rev, again)
	}
	broken.Store(false)
	now = now.Add(time.Second) // unhealthy: rounds at the agent's tick
	if r, rev = round(); !r.Component(api.ComponentAPIServer).Healthy || !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("the API server's recovery not written: %+v", r.Status)
	}
	// Unchanged, the report is written again once ReportRefresh passed,
	// and is fresh at every round in between.
	written := now
	for now.Sub(written) < ReportRefresh {
		now = now.Add(interval)
		r, again = round()
		if again != rev && now.Sub(written) < ReportRefresh {
			t.Fatalf("rewritten %s after the last write, before ReportRefresh", now.Sub(written))
		}
	}
	if again == rev || !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("not rewritten %s after the last write", now.Sub(written))
	}
	rev = again
	// A new heartbeat lease: written at once on it.
	lease = setLease()
	r, again = round()
	if again == rev {
		t.Fatal("not rewritten on the heartbeat's new lease")
	}
	onLease(lease)
	// The report goes with its lease.
	if _, err := st.Client().Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetKV(ctx, store.ComponentReportKey("cp-1")); err == nil {
		t.Fatal("the report outlived its lease")
	}
}

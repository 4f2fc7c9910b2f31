package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe/kubeprobetest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// TestComponentProbesReport: the agent of a machine in a cluster's control
// plane probes the API server (verified with the cluster CA from its file,
// at the URL the agent's configuration overrides)
// and the controller-manager of a real HTTPS server, once per interval,
// and reports them; a broken component is reported unhealthy at the next
// round, an API server whose certificate another CA signed too; a machine
// no longer in the control plane keeps no report.
func TestComponentProbesReport(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	var broken atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "[-]leaderElection failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := kubeprobetest.NewServer(t, mux)
	caFile := srv.CAFile(t)

	now := time.Unix(1_700_000_000, 0).UTC()
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker},
		ComponentProbes: ComponentProbeConfig{Interval: time.Second, ClusterCA: caFile, Kubeconfig: filepath.Join(t.TempDir(), "absent.conf"),
			URLs: map[string]string{api.ComponentAPIServer: srv.URL + "/readyz"}}}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	a.Now = func() time.Time { return now }
	ctrl := a.componentProbes()
	report := func() *api.ComponentReport {
		t.Helper()
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r := api.NewComponentReport("cp-1")
		if err := st.Get(ctx, store.ComponentReportKey("cp-1"), r); err != nil {
			return nil
		}
		return r
	}
	if r := report(); r != nil {
		t.Fatalf("a machine in no cluster reported %+v", r.Status)
	}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Probes = api.ClusterProbes{
		APIServer:         &api.ComponentProbe{URL: "https://127.0.0.1:1/readyz"}, // overridden on this machine
		ControllerManager: &api.ComponentProbe{URL: srv.URL + "/healthz"},
		Scheduler:         &api.ComponentProbe{Disabled: true},
		Interval:          api.Duration(10 * time.Second),
	}
	kc.Status.ControlPlane.Machines = []string{"cp-1"}
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.ClusterClaimKey("cp-1"), "k1"); err != nil {
		t.Fatal(err)
	}
	r := report()
	if r == nil || r.Status.Cluster != "k1" || len(r.Status.Components) != 2 || !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("report %+v, want k1's API server and controller-manager", r)
	}
	for _, c := range r.Status.Components {
		if !c.Healthy {
			t.Fatalf("%s unhealthy: %s", c.Name, c.Message)
		}
	}
	broken.Store(true)
	now = now.Add(5 * time.Second)
	if r := report(); !r.Component(api.ComponentControllerManager).Healthy {
		t.Fatal("probed again before the interval")
	}
	now = now.Add(5 * time.Second)
	r = report()
	if cm := r.Component(api.ComponentControllerManager); cm.Healthy || !strings.Contains(cm.Message, "500") || !r.Component(api.ComponentAPIServer).Healthy {
		t.Fatalf("after the break: %+v", r.Status.Components)
	}
	// While a component is unhealthy, rounds follow the agent's tick.
	broken.Store(false)
	now = now.Add(time.Second)
	if r := report(); !r.Component(api.ComponentControllerManager).Healthy || !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("not probed at the agent's tick while unhealthy: %+v", r.Status)
	}
	// Healthy, a round is due only at the cluster's interval, or at once
	// once this machine applied a new generation (a rollout's step waits
	// for a report from after its switch).
	now = now.Add(time.Second)
	if r := report(); r.Status.CheckedAt.Equal(now) {
		t.Fatal("probed again before the interval while healthy")
	}
	cfg := api.NewNixosConfiguration("cp-1")
	cfg.Spec.Generation = 2
	cfg.Status.Generation, cfg.Status.AppliedGeneration, cfg.Status.Phase = 2, 2, api.GenerationApplied
	if err := st.PutObject(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if r := report(); !r.Status.CheckedAt.Equal(now) {
		t.Fatalf("not probed at once after generation 2 was applied: checked at %s, now %s", r.Status.CheckedAt, now)
	}
	// A wrong cluster CA (another cluster's) fails the API server's probe.
	otherCA := kubeprobetest.NewServer(t, mux).CAFile(t)
	a.cfg.ComponentProbes.ClusterCA = otherCA
	ctrl = a.componentProbes()
	r = report()
	if as := r.Component(api.ComponentAPIServer); as.Healthy || !strings.Contains(as.Message, "unknown authority") {
		t.Fatalf("API server verified with another CA: %+v", as)
	}
	kc.Status.ControlPlane.Machines = nil
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if r := report(); r != nil {
		t.Fatalf("a machine out of the control plane kept its report %+v", r.Status)
	}
}

// TestComponentProbesUseTheDistributionsKubeconfig: with the cluster's
// spec.kubeconfig.path set (no admin.conf is delivered then), the
// controller-manager's and scheduler's leader leases are read through the
// API server with that file's credential: the report says which machine
// holds each.
func TestComponentProbesUseTheDistributionsKubeconfig(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc(kubeprobetest.LeasesPath, kubeprobetest.Leases(map[string]string{"kube-controller-manager": "cp-1_0001", "kube-scheduler": "cp-2_0002"}))
	srv := kubeprobetest.NewServer(t, mux)
	k3s := filepath.Join(t.TempDir(), "k3s.yaml")
	if err := os.WriteFile(k3s, srv.Kubeconfig(t, "https://127.0.0.1:6443"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker},
		ComponentProbes: ComponentProbeConfig{Interval: time.Second, ClusterCA: srv.CAFile(t), Kubeconfig: filepath.Join(t.TempDir(), "admin.conf"),
			URLs: map[string]string{api.ComponentAPIServer: srv.URL + "/readyz"}}}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	a.Now = func() time.Time { return time.Unix(1_700_000_000, 0).UTC() }
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Kubeconfig.Path = k3s
	kc.Spec.Probes = api.ClusterProbes{
		ControllerManager: &api.ComponentProbe{URL: srv.URL + "/healthz"},
		Scheduler:         &api.ComponentProbe{URL: srv.URL + "/healthz"},
	}
	kc.Status.ControlPlane.Machines = []string{"cp-1"}
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.ClusterClaimKey("cp-1"), "k1"); err != nil {
		t.Fatal(err)
	}
	if err := a.componentProbes().Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r := api.NewComponentReport("cp-1")
	if err := st.Get(ctx, store.ComponentReportKey("cp-1"), r); err != nil {
		t.Fatal(err)
	}
	if cm := r.Component(api.ComponentControllerManager); cm == nil || !cm.Healthy || !cm.HoldsLease || cm.LeaderHolder != "cp-1_0001" {
		t.Errorf("controller-manager %+v, want its lease held here (read with %s)", cm, k3s)
	}
	if s := r.Component(api.ComponentScheduler); s == nil || !s.Healthy || s.HoldsLease || s.LeaderHolder != "cp-2_0002" {
		t.Errorf("scheduler %+v, want its lease held by cp-2", s)
	}
}

package agent

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe/kubeprobetest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// TestComponentProbesExternal: a control-plane component with provider
// external is probed at its external.url, verified with its caFile, even
// where spec.probes turns the component's on-machine probe off.
func TestComponentProbesExternal(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	srv := kubeprobetest.NewServer(t, mux)
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker},
		ComponentProbes: ComponentProbeConfig{Interval: time.Second, ClusterCA: kubeprobetest.NewServer(t, mux).CAFile(t),
			Kubeconfig: filepath.Join(t.TempDir(), "absent.conf")}}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	a.Now = func() time.Time { return time.Unix(1_700_000_000, 0).UTC() }
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Probes = api.ClusterProbes{APIServer: &api.ComponentProbe{Disabled: true}, ControllerManager: &api.ComponentProbe{Disabled: true},
		Scheduler: &api.ComponentProbe{Disabled: true}}
	kc.Spec.ControlPlane.Components.Scheduler = api.ComponentSpec{Provider: api.ComponentExternal,
		External: &api.ExternalComponent{URL: srv.URL + "/healthz", CAFile: srv.CAFile(t)}}
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
	if len(r.Status.Components) != 1 {
		t.Fatalf("report %+v, want the external scheduler alone", r.Status.Components)
	}
	if s := r.Component(api.ComponentScheduler); !s.Healthy {
		t.Fatalf("external scheduler: %+v", s)
	}
}

package agent

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe/kubeprobetest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// TestComponentProbesTickOnlyInAControlPlane: a machine in no control plane
// has no probe tick (what it reads is watched; only the minute's safety net
// remains), so an idle fleet's machines read nothing for it; once its claim
// puts it in a cluster's control plane it ticks at its interval, on the
// agent's clock, and stops ticking when it leaves.
func TestComponentProbesTickOnlyInAControlPlane(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	srv := kubeprobetest.NewServer(t, mux)
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0).UTC())
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker}, Clock: clock,
		ComponentProbes: ComponentProbeConfig{Interval: time.Second, ClusterCA: srv.CAFile(t), Kubeconfig: filepath.Join(t.TempDir(), "absent.conf")}},
		nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	p := a.componentProber()
	ctrl := p.controller()
	if got := ctrl.(controller.Resyncer).ResyncInterval(); got != componentResync {
		t.Fatalf("resync %s, want the safety net %s", got, componentResync)
	}
	wakes := ctrl.(controller.Waker).Wakes()
	// ticks says whether the prober's tick is armed, and waits until it
	// is on the agent's clock.
	ticks := func(want bool, when string) {
		t.Helper()
		if got := p.tick != nil; got != want {
			t.Fatalf("%s: tick armed %v, want %v", when, got, want)
		}
		if want {
			if err := clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	reconcile := func() {
		t.Helper()
		if err := ctrl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}

	reconcile()
	ticks(false, "in no cluster")
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Probes = api.ClusterProbes{
		APIServer:         &api.ComponentProbe{URL: srv.URL + "/readyz"},
		ControllerManager: &api.ComponentProbe{Disabled: true},
		Scheduler:         &api.ComponentProbe{Disabled: true},
	}
	kc.Status.ControlPlane.Machines = []string{"cp-1"}
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	reconcile()
	ticks(false, "a cluster that has not claimed this machine")
	if _, err := st.Client().Put(ctx, store.ClusterClaimKey("cp-1"), "k1"); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if err := st.Get(ctx, store.ComponentReportKey("cp-1"), api.NewComponentReport("cp-1")); err != nil {
		t.Fatalf("no report in the control plane: %v", err)
	}
	ticks(true, "in the control plane")
	select {
	case <-wakes:
		t.Fatal("woken before the interval passed")
	default:
	}
	clock.Advance(time.Second)
	select {
	case <-wakes:
	case <-ctx.Done():
		t.Fatal("not woken one interval later")
	}
	reconcile()
	ticks(true, "still in the control plane")

	kc.Status.ControlPlane.Machines = nil
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	reconcile()
	ticks(false, "out of the control plane")
	if err := st.Get(ctx, store.ComponentReportKey("cp-1"), api.NewComponentReport("cp-1")); err == nil {
		t.Fatal("a machine out of the control plane kept its report")
	}
}

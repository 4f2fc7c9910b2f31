package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// TestEachMachineProbesItsOwnAPIServer: three control-plane machines of
// the sandbox run real API servers, each on its own loopback address, and
// each agent probes its own (componentProbes.apiServerURL). Stopping cp-2's
// kube-apiserver turns cp-2's report of it not ready and no other's, and
// the cluster's kube-apiserver count drops from 3 to 2 without cp-2; once
// it is started again, all three are ready again. A machine that probed
// another's API server (or all one address, as every machine did before
// the per-machine URLs) fails it: cp-2's report would stay ready, or
// another's would turn.
func TestEachMachineProbesItsOwnAPIServer(t *testing.T) {
	kubetest.FindBinaries(t)
	f := newFleet(t, fleetOptions{cps: 3, clusters: true})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cps := []string{"cp-1", "cp-2", "cp-3"}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.GitRepo, kc.Spec.Version = "https://git.example/kube", "1.37.2"
	kc.Spec.ControlPlane.Machines = cps
	kc.Spec.Etcd.Provider = api.EtcdProviderNico
	kc.Spec.Probes.Interval = api.Duration(time.Second)
	kc.Spec.Rollout.StepTimeout = api.Duration(3 * time.Minute)
	if err := kc.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	apiReady := func(want ...string) func(*api.KubernetesCluster) bool {
		return func(kc *api.KubernetesCluster) bool {
			for _, c := range kc.Status.Components {
				if c.Name == api.ComponentAPIServer {
					return c.Ready == len(want) && slices.Equal(c.ReadyMachines, want)
				}
			}
			return false
		}
	}
	f.waitCluster(t, ctx, "k1", 6*time.Minute, "Ready with 3 API servers", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady && apiReady(cps...)(kc)
	})

	cp := f.machines["cp-2"].ControlPlane()
	if cp == nil {
		t.Fatal("cp-2 runs no control plane at Ready")
	}
	stopped := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	f.waitReports(t, ctx, stopped, cps, "cp-2", false)
	f.waitCluster(t, ctx, "k1", time.Minute, "kube-apiserver ready on cp-1 and cp-3 only", apiReady("cp-1", "cp-3"))

	started := time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitReports(t, ctx, started, cps, "cp-2", true)
	f.waitCluster(t, ctx, "k1", time.Minute, "kube-apiserver ready on all three again", apiReady(cps...))
}

// waitReports waits until changed's ComponentReport, checked after since,
// says its kube-apiserver is ready changedReady, and every other
// machine's says ready. An agent writes its report when a round finds
// something else than the report says: another machine's stays as it
// was, and one that turned not ready (it probes another machine's API
// server) is written at its next round and fails at once.
func (f *fleet) waitReports(t *testing.T, ctx context.Context, since time.Time, machines []string, changed string, changedReady bool) {
	t.Helper()
	testwait.For(t, time.Minute, fmt.Sprintf("kube-apiserver reports: %s ready %v, the others ready", changed, changedReady), func() (bool, string) {
		var pending []string
		for _, m := range machines {
			r := &api.ComponentReport{}
			if err := f.st.Get(ctx, store.ComponentReportKey(m), r); err != nil {
				pending = append(pending, m+": "+err.Error())
				continue
			}
			want := m != changed || changedReady
			h := r.Component(api.ComponentAPIServer)
			switch {
			case h == nil:
				pending = append(pending, m+": no kube-apiserver in its report")
			case m == changed && !r.Status.CheckedAt.After(since):
				pending = append(pending, m+": report checked before the change")
			case !h.Healthy && m != changed:
				t.Fatalf("%s's kube-apiserver report turned not ready (%s) though only %s's API server changed: it probes another machine's", m, h.Message, changed)
			case h.Healthy != want:
				pending = append(pending, fmt.Sprintf("%s: healthy %v, want %v", m, h.Healthy, want))
			}
		}
		return len(pending) == 0, strings.Join(pending, "; ")
	})
}

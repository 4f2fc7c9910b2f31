package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
)

// TestFactsJudgeAnExternalAPIServerByItsReport: an external API server is
// probed by the agents at its URL even when spec.probes disables the
// on-machine probe (EffectiveProbes), so the leader judges it by their
// report, not as "not probed".
func TestFactsJudgeAnExternalAPIServerByItsReport(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kc := api.NewKubernetesCluster("k")
	kc.Spec.Probes.APIServer = &api.ComponentProbe{Disabled: true}
	kc.Spec.ControlPlane.Components.APIServer = api.ComponentSpec{
		Provider: api.ComponentExternal,
		External: &api.ExternalComponent{URL: "https://127.0.0.1:6443/readyz"},
	}
	report := &api.ComponentReport{Status: api.ComponentReportStatus{
		Cluster:   "k",
		CheckedAt: now,
		Components: []api.ComponentHealth{
			{Name: api.ComponentAPIServer, Healthy: false, Message: "readyz: etcd not ready"},
		},
	}}
	cc := &clusterController{now: func() time.Time { return now }}
	f := &clusterFleet{reports: map[string]*api.ComponentReport{"cp-1": report}}
	fa := cc.facts(kc, kubeplan.Selection{ControlPlane: []string{"cp-1"}}, f, nil)
	got := fa.ControlPlane[0].APIServer
	if !got.Reported || got.Healthy || got.Message != "readyz: etcd not ready" {
		t.Fatalf("the external API server is judged %+v; want the agents' report (not healthy, readyz: etcd not ready)", got)
	}
}

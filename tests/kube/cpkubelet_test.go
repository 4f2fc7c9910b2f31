package kube

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// TestControlPlaneKubeletDrainedOnItsSwitch: a control-plane machine that
// runs a kubelet joins with the bootstrap kubeconfig like a worker (its
// Node named after it), and a gitRepo change rolls it as a Kubernetes
// node too: its Node cordoned before its switch, Ready and schedulable
// again after, never two Nodes cordoned at once.
func TestControlPlaneKubeletDrainedOnItsSwitch(t *testing.T) {
	kubetest.FindBinaries(t)
	machines := []string{"cp-1", "dp-1"}
	if !kubetest.InNetns(t, "TestControlPlaneKubeletDrainedOnItsSwitch", workerAddrs(machines)...) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	f := newFleet(t, fleetOptions{cps: 1, dps: 1, clusters: true, workers: true, cpKubelets: true})
	if err := f.st.PutObject(ctx, workerClusterSpec(t, []string{"cp-1"}, []string{"dp-1"})); err != nil {
		t.Fatal(err)
	}
	f.waitClusterTB(t, ctx, "k1", 4*time.Minute, func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady }, "Ready")
	admin := f.adminClient(t, ctx, "k1")
	testwait.For(t, 2*time.Minute, "both Nodes Ready", func() (bool, string) {
		nodes, err := admin.Nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		return nodes["cp-1"].Ready && nodes["dp-1"].Ready, ""
	})

	w := watchDisruption(ctx, t, admin, "none", machines)
	const repo = "https://git.example/kube-2"
	f.changeCluster(t, ctx, "k1", func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = repo })
	f.waitRolled(t, ctx, "k1", 3*time.Minute, "gitRepo", func(s api.NixosConfigurationSpec) bool { return s.GitRepo == repo })
	seen := w.stop()
	t.Logf("rolled: %s", seen)
	if !seen.cordoned["cp-1"] || !seen.cordoned["dp-1"] {
		t.Errorf("cordoned during the roll: %v, want cp-1 and dp-1", seen.cordoned)
	}
	if seen.maxCordoned > 1 {
		t.Errorf("%d Nodes cordoned at once", seen.maxCordoned)
	}
	nodes, err := admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		if n := nodes[m]; !n.Ready || n.Unschedulable {
			t.Errorf("Node %s after the roll: %+v", m, n)
		}
	}
}

package kube

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/kubetest"
)

// TestWorkerSwitchThatStopsTheKubeletHalts: a gitRepo change whose
// generation leaves the kubelet out (the switch stops it and succeeds)
// rolls onto dp-1 only. Its Node still reads Ready, as the kubelet last
// posted it, but no heartbeat comes after the switch: dp-1 is never
// counted done, the rollout halts at the step timeout naming it, and dp-2
// is never drained nor switched; the Deployment keeps its budget. Rolling
// the cluster back to its repository starts dp-1's kubelet again and the
// cluster turns Ready with both Nodes schedulable.
func TestWorkerSwitchThatStopsTheKubeletHalts(t *testing.T) {
	kubetest.FindBinaries(t)
	dps := []string{"dp-1", "dp-2"}
	if !kubetest.InNetns(t, "TestWorkerSwitchThatStopsTheKubeletHalts", workerAddrs(dps)...) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 9*time.Minute)
	defer cancel()
	f, admin, k := newWorkerCluster(t, ctx, 1, dps)
	const broken = "https://git.example/kube-no-kubelet"
	for _, m := range dps {
		f.machines[m].SetKubeletOffIn(broken)
	}
	good := workerClusterSpec(t, []string{"cp-1"}, dps).Spec.GitRepo

	w := watchDisruption(ctx, t, admin, "web", dps)
	f.changeCluster(t, ctx, "k1", func(kc *api.KubernetesCluster) {
		kc.Spec.GitRepo = broken
		kc.Spec.Rollout.StepTimeout = api.Duration(time.Minute)
	})
	halted := f.waitHalted(t, ctx, 4*time.Minute, func(r *api.Rollout) bool { return r.Spec.Template.GitRepo == broken })
	seen := w.stop()
	t.Logf("rollout %s halted at %s: %s (pods and Nodes: %s)", halted.Metadata.Name, halted.Status.HaltedNode, halted.Status.HaltedReason, seen)
	if halted.Status.HaltedNode != "dp-1" {
		t.Errorf("halted at %q, want dp-1", halted.Status.HaltedNode)
	}
	if p := halted.Node("dp-2"); p == nil || p.Phase != api.NodePending || !p.DrainStartedAt.IsZero() {
		t.Errorf("dp-2 in the halted rollout: %+v, want never drained", p)
	}
	dp2 := &api.NixosConfiguration{}
	if err := f.st.Get(ctx, store.NixosConfigKey("dp-2"), dp2); err != nil {
		t.Fatal(err)
	}
	if dp2.Spec.GitRepo == broken {
		t.Error("dp-2 was switched to the generation that stops the kubelet")
	}
	if seen.minReady < 2 {
		t.Errorf("%d ready pods at one point, below the budget's minAvailable 2", seen.minReady)
	}
	if seen.cordoned["dp-2"] {
		t.Error("dp-2 was cordoned")
	}
	if f.machines["dp-1"].RunningWorker().Kubelet != nil {
		t.Error("dp-1's kubelet runs: the generation did not stop it")
	}

	// Back to the repository that runs the kubelet.
	f.changeCluster(t, ctx, "k1", func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = good })
	f.waitRolled(t, ctx, "k1", 3*time.Minute, "the way back", func(s api.NixosConfigurationSpec) bool { return s.GitRepo == good })
	nodes, err := admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range dps {
		if n := nodes[m]; !n.Ready || n.Unschedulable {
			t.Errorf("Node %s after the way back: %+v", m, n)
		}
	}
	if out, err := k.Run(ctx, nil, "rollout", "status", "deployment/web", "--timeout=1m"); err != nil {
		t.Fatalf("the Deployment after the way back: %v\n%s", err, out)
	}
}

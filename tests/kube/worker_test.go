package kube

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/kubetest"
)

// TestRealWorkerJoins: a cluster over one control-plane machine and one
// data-plane machine that runs a real worker (Debian's containerd and
// runc, the built kubelet, CNI's bridge): the leader registers the
// bootstrap token once the API server is ready; the kubelet, given only
// the bootstrap kubeconfig and CA nico delivered, registers through the
// CSR auto-approval; while its Node is missing or not Ready the cluster
// is not Ready and DataPlaneReady names dp-1; it turns Ready only once the
// Node is Ready, with dp-1 in dataPlane.readyMachines.
func TestRealWorkerJoins(t *testing.T) {
	kubetest.FindBinaries(t)
	if !kubetest.InNetns(t, "TestRealWorkerJoins", workerIP("dp-1")+"/24") {
		return
	}
	f := newFleet(t, fleetOptions{cps: 1, dps: 1, clusters: true, workers: true})
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	kc := workerClusterSpec(t, []string{"cp-1"}, []string{"dp-1"})
	t0 := time.Now()
	if err := f.st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}

	// While dp-1 runs its configuration but its Node is not Ready, the
	// cluster says so, naming it.
	_, held := f.waitCluster(t, ctx, "k1", 4*time.Minute, "DataPlaneReady false naming dp-1's Node", func(kc *api.KubernetesCluster) bool {
		c := api.FindClusterCondition(kc.Status.Conditions, api.CondDataPlaneReady)
		return c != nil && c.Status == api.ConditionFalse && c.Reason == kubeplan.ReasonNodeNotReady && strings.Contains(c.Message, "dp-1: Node")
	})
	t.Logf("held: phase %s, %s", held.Status.Phase, api.FindClusterCondition(held.Status.Conditions, api.CondDataPlaneReady).Message)
	if held.Status.Phase == api.ClusterReady || held.Status.DataPlane.Ready != 0 {
		t.Fatalf("dp-1's Node not Ready, yet phase %s, data plane %+v", held.Status.Phase, held.Status.DataPlane)
	}

	seen, ready := f.waitCluster(t, ctx, "k1", 3*time.Minute, "Ready", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady
	})
	t.Logf("apply to Ready with a real kubelet: %s; phases %v", time.Since(t0).Round(time.Millisecond), seen)
	if ready.Status.DataPlane.Ready != 1 || len(ready.Status.DataPlane.ReadyMachines) != 1 || ready.Status.DataPlane.ReadyMachines[0] != "dp-1" {
		t.Fatalf("Ready with data plane %+v", ready.Status.DataPlane)
	}

	// The Node is Ready in the API server; the kubelet holds its own
	// certificate, and dp-1 no admin credential.
	admin := f.adminClient(t, ctx, "k1")
	nodes, err := admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodes["dp-1"]; !n.Ready {
		t.Fatalf("Node dp-1 %+v at the cluster's Ready", n)
	}
	w := f.machines["dp-1"].RunningWorker()
	if w == nil {
		t.Fatal("dp-1 runs no worker")
	}
	b, err := os.ReadFile(w.Kubeconfig)
	if err != nil || !strings.Contains(string(b), "client-certificate") {
		t.Fatalf("the kubelet's own kubeconfig: %v\n%s", err, b)
	}
	for _, p := range []string{kubepki.DefaultPaths().Kubeconfig, kubepki.DefaultPaths().JoinToken, kubepki.DefaultPaths().CAKey} {
		if _, err := os.Stat(f.machines["dp-1"].Path(p)); err == nil {
			t.Errorf("dp-1 holds %s", p)
		}
	}
	var sec kubeapi.Secret
	tok := f.bootstrapToken(t, ctx, "k1")
	if err := admin.Get(ctx, "/api/v1/namespaces/kube-system/secrets/bootstrap-token-"+tok.ID, &sec); err != nil || sec.Type != kubeapi.BootstrapTokenType {
		t.Fatalf("bootstrap token %s in the cluster: %v %+v", tok.ID, err, sec.Metadata)
	}

	// Released and claimed by another cluster (its own CA): dp-1's kubelet
	// joins it anew, its credentials for k1 left where k1 put them.
	f.deleteCluster(t, ctx, "k1")
	kc2 := workerClusterSpec(t, []string{"cp-1"}, []string{"dp-1"})
	kc2.Metadata.Name = "k2"
	t1 := time.Now()
	if err := f.st.PutObject(ctx, kc2); err != nil {
		t.Fatal(err)
	}
	f.waitCluster(t, ctx, "k2", 4*time.Minute, "k2 Ready over the machines k1 released", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady
	})
	nodes, err = f.adminClient(t, ctx, "k2").Nodes(ctx)
	if n := nodes["dp-1"]; err != nil || !n.Ready {
		t.Fatalf("Node dp-1 in k2: %+v (%v)", n, err)
	}
	t.Logf("apply to Ready of a second cluster over the released machines: %s", time.Since(t1).Round(time.Millisecond))
}

// adminClient is a kubeapi client of cluster name with its admin
// kubeconfig, closed when the test ends.
func (f *fleet) adminClient(t testing.TB, ctx context.Context, name string) *kubeapi.Client {
	t.Helper()
	sec := api.NewSecret(api.KubeconfigSecretName(name))
	if err := secrets.New(f.st, f.box).Get(ctx, store.NamedSecretKey(sec.Metadata.Name), sec); err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.FromKubeconfig(sec.Spec.Data[api.KubeconfigSecretKey])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// bootstrapToken is cluster name's current bootstrap token.
func (f *fleet) bootstrapToken(t *testing.T, ctx context.Context, name string) kubepki.BootstrapToken {
	t.Helper()
	sec := api.NewSecret(kubepki.BootstrapTokenSecret(name))
	if err := secrets.New(f.st, f.box).Get(ctx, store.NamedSecretKey(sec.Metadata.Name), sec); err != nil {
		t.Fatal(err)
	}
	tok, err := kubepki.ParseBootstrapToken(sec.Spec.Data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

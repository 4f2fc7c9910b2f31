package coordinator

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
)

// TestClusterPassWithoutClustersReadsNoFleet: while the store holds no
// KubernetesCluster and no machine claim one owns, a pass of the cluster
// controller reads neither the nodes nor their configurations (a fleet
// without Kubernetes clusters pays nothing per node for the controller
// on each rollout step); a cluster, or a claim a deleted cluster left,
// brings the whole read back.
func TestClusterPassWithoutClustersReadsNoFleet(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ctx := t.Context()
	c, fence := leaderTerm(t, st, "leader")
	cc := testClusterController(c, fence)
	n := api.NewNode("w-1")
	n.Status.Phase = api.NodeRegistered
	if err := st.PutObject(ctx, n); err != nil {
		t.Fatal(err)
	}
	faults := &memetcd.Faults{}
	faults.Wrap(st.Client())
	fleetRead := errors.New("the pass read the nodes")
	for _, dir := range []string{store.NodesDir, store.NixosConfigsDir} {
		faults.Add(memetcd.Fault{Kinds: memetcd.Get | memetcd.Txn, Prefix: dir, Err: fleetRead})
	}

	if err := cc.reconcile(ctx); err != nil {
		t.Fatalf("pass without clusters: %v, want nil and no read of the fleet", err)
	}

	claim := api.NewMachineClaim("gone-workers")
	claim.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: "gone"}}
	claim.Spec.Pool = "web"
	if err := st.PutObject(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := cc.reconcile(ctx); !errors.Is(err, fleetRead) {
		t.Fatalf("pass with a claim of a deleted cluster: %v, want the fleet read (to release the claim)", err)
	}
	if err := st.Delete(ctx, store.MachineClaimKey(claim.Metadata.Name)); err != nil {
		t.Fatal(err)
	}

	if err := st.PutObject(ctx, api.NewKubernetesCluster("web")); err != nil {
		t.Fatal(err)
	}
	if err := cc.reconcile(ctx); !errors.Is(err, fleetRead) {
		t.Fatalf("pass with a cluster: %v, want the fleet read", err)
	}
}

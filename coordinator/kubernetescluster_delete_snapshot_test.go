package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
	"github.com/homystack/nico/pkg/store"
)

// TestClusterDeletionKeepsASnapshot: a deleted cluster's data leaves
// nico's etcd only after a snapshot of it was taken (spec.snapshots set,
// beforeChange Required by default): while the store fails, the cluster
// stays Deleting with its secrets and data; once it answers, the snapshot
// is taken, naming the cluster, and the deletion finishes.
func TestClusterDeletionKeepsASnapshot(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	ec := api.NewEtcdCluster()
	ec.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: "/mnt/share/etcd"}
	if err := h.st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	mem := snapshottest.NewMem()
	mem.FailWith(errors.New("share not mounted"))
	h.snapStore = func(string) (snapshot.Store, error) { return mem, nil }

	h.readyThenDelete("k1")
	for i := 0; i < 15; i++ {
		h.pass()
	}
	if kc := h.cluster("k1"); kc == nil || kc.Status.Phase != api.ClusterDeleting {
		t.Fatalf("cluster %+v with no snapshot possible, want it kept, Deleting", kc)
	}
	if len(h.secrets.deleted) != 0 {
		t.Fatalf("secrets and data deleted for %v before any snapshot", h.secrets.deleted)
	}

	mem.FailWith(nil)
	h.now = h.now.Add(time.Minute) // past the held snapshot's retry
	for i := 0; i < 5 && h.cluster("k1") != nil; i++ {
		h.pass()
	}
	if h.cluster("k1") != nil {
		t.Fatalf("cluster still there once the store answers: %+v", h.cluster("k1").Status)
	}
	metas, err := mem.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 1 || !strings.Contains(metas[0].Reason, "deletion of cluster k1") {
		t.Fatalf("snapshots %+v, want one taken before cluster k1's deletion", metas)
	}
}

package loadconfig

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/homystack/nico/pkg/store"
)

// TestManifestApplies: the manifest the module renders for a fleet
// declared with every kind (tests/nixos/eval, fleetManifest) is what the
// agent applies: it decodes, and applies on etcd with each object marked
// as the flake's.
func TestManifestApplies(t *testing.T) {
	path := os.Getenv("NICO_NIX_MANIFEST")
	if path == "" {
		t.Skip("NICO_NIX_MANIFEST is not set: make nix-check renders the module's manifest and runs this test when nixpkgs' lib is found")
	}
	e := etcdtest.Start(t, 1)
	t.Cleanup(e.Close)
	cli := etcdtest.NewClient(t, e.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &objectapply.Cluster{Store: st, Client: cli, Health: 2 * time.Second}
	res, err := c.ApplyFile(ctx, path, "cp-1")
	if err != nil {
		t.Fatalf("the module's manifest is refused: %v", err)
	}
	t.Logf("%s\n%v", res.Decision.Reason, res.Messages)
	rec := &api.FlakeObjects{}
	if err := st.Get(ctx, store.FlakeObjectsKey, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Spec.Revision != "abc123" || len(rec.Status.Objects) != 3 {
		t.Fatalf("record %+v, want revision abc123 with 3 objects", rec.Spec)
	}
	kc := &api.KubernetesCluster{}
	if err := st.Get(ctx, store.ClusterKey("prod"), kc); err != nil || kc.Metadata.Declared == nil {
		t.Fatalf("cluster prod %+v (%v), want it marked as the flake's", kc.Metadata, err)
	}
}

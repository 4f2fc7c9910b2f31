package rollout

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// TestConfigureTemplatesAndOwners: a node named in Templates gets its own
// template, the others the shared one; the rollout's owners become the
// configuration's.
func TestConfigureTemplatesAndOwners(t *testing.T) {
	r := api.NewRollout("k1-1")
	r.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: "k1"}}
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/shared"}
	r.Spec.Templates = map[string]api.NixosConfigurationSpec{"cp-1": {GitRepo: "https://git.example/k", Flake: "#cp-1"}}
	own := Configure(r, &api.NodeProgress{Name: "cp-1"}, nil)
	if own.Spec.Flake != "#cp-1" || own.Spec.GitRepo != "https://git.example/k" || own.Spec.Generation != 1 {
		t.Fatalf("cp-1 got %+v, want its own template at generation 1", own.Spec)
	}
	if len(own.Metadata.OwnerReferences) != 1 || own.Metadata.OwnerReferences[0].Name != "k1" {
		t.Fatalf("cp-1's owners %+v, want the rollout's", own.Metadata.OwnerReferences)
	}
	cur := api.NewNixosConfiguration("dp-1")
	cur.Spec = api.NixosConfigurationSpec{Generation: 4, GitRepo: "https://git.example/old"}
	shared := Configure(r, &api.NodeProgress{Name: "dp-1"}, cur)
	if shared.Spec.GitRepo != "https://git.example/shared" || shared.Spec.Generation != 5 {
		t.Fatalf("dp-1 got %+v, want the shared template at generation 5", shared.Spec)
	}
}

package coordinator

import (
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// clusterNixOf is the cluster.nix a rollout delivers to machine m.
func clusterNixOf(t *testing.T, r *api.Rollout, m string) string {
	t.Helper()
	for _, f := range r.Spec.Templates[m].AdditionalFiles {
		if f.Path == "cluster.nix" {
			return f.Inline
		}
	}
	t.Fatalf("the rollout gives %s no cluster.nix: %+v", m, r.Spec.Templates[m].AdditionalFiles)
	return ""
}

// TestComponentChangeRolls: on a Ready cluster, each change of a
// component (its extraArgs, its limits, its version, its provider)
// changes the cluster.nix every machine gets, so a rollout carrying the
// new file follows.
func TestComponentChangeRolls(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	kc := selectorCluster("k1", 1, 1)
	h.create(kc)
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	cases := []struct {
		name string
		mod  func(*api.KubernetesCluster)
		want string // a line of the new cluster.nix
	}{
		{"apiServer extraArgs", func(kc *api.KubernetesCluster) {
			kc.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"audit-log-maxage": "7"}
		}, `extraArgs = { "audit-log-maxage" = "7"; };`},
		{"scheduler limits", func(kc *api.KubernetesCluster) {
			kc.Spec.ControlPlane.Components.Scheduler.Resources = api.ComponentResources{CPU: "250m", Memory: "256Mi"}
		}, `limits = { "CPUQuota" = "25%"; "MemoryMax" = "268435456"; };`},
		{"kubelet version", func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Kubelet.Version = "1.36.2" }, `version = "1.36.2";`},
		{"controllerManager provider", func(kc *api.KubernetesCluster) {
			kc.Spec.ControlPlane.Components.ControllerManager = api.ComponentSpec{Provider: api.ComponentExternal,
				External: &api.ExternalComponent{URL: "https://10.0.0.9:10257/healthz"}}
		}, `external = { url = "https://10.0.0.9:10257/healthz"; };`},
	}
	for _, tc := range cases {
		kc := h.cluster("k1")
		seen := map[string]bool{}
		for _, r := range h.rollouts() {
			seen[r.Metadata.Name] = true
		}
		tc.mod(kc)
		kc.Metadata.Generation++
		if err := kc.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := h.st.UpdateObject(t.Context(), kc); err != nil {
			t.Fatal(err)
		}
		h.pass()
		var fresh *api.Rollout
		for _, r := range h.rollouts() {
			if !seen[r.Metadata.Name] {
				fresh = r
			}
		}
		if fresh == nil {
			t.Fatalf("%s: no rollout followed", tc.name)
		}
		for _, m := range fresh.Spec.Nodes {
			if nix := clusterNixOf(t, fresh, m); !slices.Contains(strings.Split(nix, "\n"), "      "+tc.want) {
				t.Errorf("%s: %s's cluster.nix lacks %q:\n%s", tc.name, m, tc.want, nix)
			}
		}
		h.untilPhase(api.ClusterReady)
		h.untilInSync()
	}
}

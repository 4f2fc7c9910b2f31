package kubepki

import (
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// TestDistributionKubeconfigIsNotMade: with the distribution writing the
// admin kubeconfig (spec.kubeconfig.path; a control-plane agent publishes
// it under KubeconfigSecret), kubepki makes no admin kubeconfig and lays
// out no admin.conf; the other kubeconfigs stay.
func TestDistributionKubeconfigIsNotMade(t *testing.T) {
	c := Cluster{Name: "k1", Endpoint: "https://10.0.0.5:6443"}
	has := func(ls []Leaf, name string) bool {
		return slices.ContainsFunc(ls, func(l Leaf) bool { return l.Secret == name })
	}
	if !has(Leaves(c), KubeconfigSecret("k1")) {
		t.Fatal("no admin kubeconfig leaf by default")
	}
	c.DistributionKubeconfig = true
	if ls := Leaves(c); has(ls, KubeconfigSecret("k1")) || !has(ls, ControllerManagerSecret("k1")) || !has(ls, SchedulerSecret("k1")) {
		t.Fatalf("leaves with the distribution's kubeconfig: %+v", ls)
	}
	admin := func(fs []api.HostFile) bool {
		return slices.ContainsFunc(fs, func(f api.HostFile) bool { return f.Path == DefaultPaths().Kubeconfig })
	}
	if !admin((Layout{Cluster: "k1"}).HostFiles("cp-1", RoleControlPlane)) {
		t.Fatal("no admin.conf by default")
	}
	if fs := (Layout{Cluster: "k1", DistributionKubeconfig: true}).HostFiles("cp-1", RoleControlPlane); admin(fs) {
		t.Fatalf("admin.conf laid out though the distribution writes its own: %+v", fs)
	}
}

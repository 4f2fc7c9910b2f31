package coordinator

import (
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// TestDistributionKubeconfigCondition: a cluster whose distribution writes
// its own kubeconfig (spec.kubeconfig.path) gets no kubeconfig from the
// leader; KubeconfigPublished waits for the publisher (the first ready
// control-plane machine), says why its report failed naming the path, and
// turns true with status.kubeconfigSecret once the agent published it.
func TestDistributionKubeconfigCondition(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	for _, m := range []string{"cp-1", "cp-2", "dp-1"} {
		h.machine(m)
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1", "cp-2"}
	kc.Spec.DataPlane.Machines = []string{"dp-1"}
	kc.Spec.Kubeconfig.Path = "/etc/rancher/k3s/k3s.yaml"
	h.create(kc)
	h.untilPhase(api.ClusterReady)
	h.pass()
	cond := func() *api.ClusterCondition {
		t.Helper()
		return api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondKubeconfigPublished)
	}
	if c := cond(); c == nil || c.Status != api.ConditionFalse || c.Reason != reasonWaitingForPublisher ||
		!strings.Contains(c.Message, "cp-1") || !strings.Contains(c.Message, "/etc/rancher/k3s/k3s.yaml") {
		t.Fatalf("before the agent's report: %+v", c)
	}
	if _, ok := h.secrets.kubeconfig["k1"]; ok {
		t.Fatal("the leader made a kubeconfig for a cluster whose distribution writes its own")
	}
	if s := h.cluster("k1").Status.KubeconfigSecret; s != "" {
		t.Fatalf("status.kubeconfigSecret %q before it was published", s)
	}
	r := api.NewKubeconfigReport("k1")
	r.Status = api.KubeconfigReportStatus{Machine: "cp-1", Path: "/etc/rancher/k3s/k3s.yaml",
		Message: "/etc/rancher/k3s/k3s.yaml on cp-1: read: open /etc/rancher/k3s/k3s.yaml: no such file or directory"}
	if err := h.st.PutObject(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	h.pass()
	if c := cond(); c == nil || c.Status != api.ConditionFalse || c.Reason != reasonPublishFailed || !strings.Contains(c.Message, "no such file") {
		t.Fatalf("failed report: %+v", c)
	}
	r.Status = api.KubeconfigReportStatus{Machine: "cp-1", Path: "/etc/rancher/k3s/k3s.yaml", Published: true, Server: "https://127.0.0.10:6443"}
	if err := h.st.PutObject(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	h.pass()
	if c := cond(); c == nil || c.Status != api.ConditionTrue || !strings.Contains(c.Message, "k1-kubeconfig") {
		t.Fatalf("published report: %+v", c)
	}
	if s := h.cluster("k1").Status.KubeconfigSecret; s != "k1-kubeconfig" {
		t.Fatalf("status.kubeconfigSecret %q", s)
	}
}

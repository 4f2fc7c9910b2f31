package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
)

// TestClusterProvisionsInOrder: a cluster over three control-plane and two
// data-plane machines gets its machines claimed and a Rollout of the
// control plane (never a configuration written by the cluster
// controller); the rollout controller writes the configurations; as the
// agents apply and report, the conditions come true in dependency order,
// no data-plane machine gets a configuration before the API servers are
// ready, and the phase goes Provisioning -> Ready.
func TestClusterProvisionsInOrder(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	for i := 1; i <= 3; i++ {
		h.machine(fmt.Sprintf("cp-%d", i), "role", "cp")
	}
	h.machine("dp-1", "role", "dp")
	h.machine("dp-2", "role", "dp")
	h.machine("dp-3", "role", "dp")
	h.create(selectorCluster("k1", 3, 2))

	firstTrue := map[string]int{}
	var phases []api.ClusterPhase
	apiReadyAt := -1
	h.hold["dp-1"], h.hold["dp-2"] = true, true
	for i := 0; i < 30; i++ {
		switch i {
		case 3:
			h.probing = []string{api.ComponentAPIServer}
		case 6:
			h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
		case 9: // the data plane's agents apply only now
			h.hold = map[string]bool{}
		}
		h.pass()
		kc := h.cluster("k1")
		if n := len(phases); n == 0 || phases[n-1] != kc.Status.Phase {
			phases = append(phases, kc.Status.Phase)
		}
		for _, c := range kc.Status.Conditions {
			if _, seen := firstTrue[c.Type]; !seen && c.Status == api.ConditionTrue {
				firstTrue[c.Type] = i
			}
		}
		if c := api.FindClusterCondition(kc.Status.Conditions, api.CondAPIServerReady); c != nil && c.Status == api.ConditionTrue && apiReadyAt < 0 {
			apiReadyAt = i
		}
		for _, dp := range []string{"dp-1", "dp-2"} {
			if h.config(dp) != nil && apiReadyAt < 0 {
				t.Fatalf("pass %d: %s has a configuration before the API servers are ready", i, dp)
			}
		}
		if kc.Status.Phase == api.ClusterReady {
			break
		}
	}
	kc := h.cluster("k1")
	if !slices.Equal(phases, []api.ClusterPhase{api.ClusterProvisioning, api.ClusterReady}) {
		t.Fatalf("phases %v, want Provisioning then Ready; status %+v", phases, kc.Status)
	}
	for i := 1; i < len(api.ClusterConditionTypes); i++ {
		prev, cur := api.ClusterConditionTypes[i-1], api.ClusterConditionTypes[i]
		if prev == api.CondControllerManagerReady { // it and the scheduler come together
			continue
		}
		if firstTrue[cur] < firstTrue[prev] || (cur != api.CondSchedulerReady && cur != api.CondControlPlaneReady && firstTrue[cur] == firstTrue[prev]) {
			t.Errorf("%s true at pass %d, before or with %s at %d", cur, firstTrue[cur], prev, firstTrue[prev])
		}
	}
	if kc.Status.ObservedGeneration != 1 || kc.Status.Version != "1.37.2" || kc.Status.KubeconfigSecret != "k1-kubeconfig" {
		t.Errorf("status %+v", kc.Status)
	}
	if kc.Status.ControlPlane.Ready != 3 || kc.Status.DataPlane.Ready != 2 || !slices.Equal(kc.Status.DataPlane.Machines, []string{"dp-1", "dp-2"}) {
		t.Errorf("planes %+v %+v", kc.Status.ControlPlane, kc.Status.DataPlane)
	}
	for _, comp := range kc.Status.Components {
		if comp.Name == api.ComponentControllerManager && comp.Leader != "cp-1" {
			t.Errorf("controller-manager leader %q, want cp-1", comp.Leader)
		}
	}
	claims := h.claims()
	if len(claims) != 5 || claims["dp-3"] != "" {
		t.Errorf("claims %v, want the five selected machines", claims)
	}
	rs := h.rollouts()
	if len(rs) == 0 || rs[0].Metadata.Name != "k1-2" {
		names := []string{}
		for _, r := range rs {
			names = append(names, r.Metadata.Name)
		}
		t.Fatalf("rollouts %v, want k1-1 (control plane, deleted once finished) then k1-2 (data plane)", names)
	}
	if !slices.Equal(rs[0].Spec.Nodes, []string{"dp-1", "dp-2"}) || !kubeplan.OwnedBy(rs[0].Metadata.OwnerReferences, "k1") {
		t.Errorf("rollout k1-2 %+v", rs[0].Spec)
	}
	cfg := h.config("cp-2")
	if !kubeplan.OwnedBy(cfg.Metadata.OwnerReferences, "k1") || cfg.Spec.Flake != "#cp-2" || cfg.Spec.OnRemoveFlake != "#minimal" || cfg.Spec.GitRepo != "https://git.example/fleet" {
		t.Fatalf("cp-2's configuration %+v %+v", cfg.Metadata, cfg.Spec)
	}
	if len(cfg.Spec.AdditionalFiles) != 1 || cfg.Spec.AdditionalFiles[0].Path != "cluster.nix" || !strings.Contains(cfg.Spec.AdditionalFiles[0].Inline, `"dp-2"`) {
		t.Errorf("cp-2's files %+v, want cluster.nix naming every node", cfg.Spec.AdditionalFiles)
	}
	if len(cfg.Spec.HostFiles) != 1 || cfg.Spec.HostFiles[0].SecretRef.Name != "k1-ca" {
		t.Errorf("cp-2's host files %+v", cfg.Spec.HostFiles)
	}
	if h.config("dp-3") != nil {
		t.Error("dp-3, not selected, got a configuration")
	}
}

// TestClusterWaitsForMachinesAndFailsOnUnknown: too few matching machines
// leave the cluster Provisioning with WaitingForMachines and the number
// missing; a named machine that does not exist fails it, naming it.
func TestClusterWaitsForMachinesAndFailsOnUnknown(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.create(selectorCluster("k1", 3, 2))
	named := api.NewKubernetesCluster("k2")
	named.Spec.Version = "1.37.2"
	named.Spec.ControlPlane.Machines = []string{"cp-9"}
	h.create(named)
	h.pass()
	kc := h.cluster("k1")
	cp := api.FindClusterCondition(kc.Status.Conditions, api.CondControlPlaneReady)
	if kc.Status.Phase != api.ClusterProvisioning || cp == nil || cp.Reason != api.ReasonWaitingForMachines || !strings.Contains(kc.Status.Message, "3 machines missing") {
		t.Fatalf("k1 %s %q %+v, want Provisioning, WaitingForMachines, 3 missing", kc.Status.Phase, kc.Status.Message, cp)
	}
	if kc.Status.Version != "" {
		t.Fatalf("k1's status.version %q before any machine rolled", kc.Status.Version)
	}
	k2 := h.cluster("k2")
	if k2.Status.Phase != api.ClusterFailed || !strings.Contains(k2.Status.Message, "cp-9") {
		t.Fatalf("k2 %s %q, want Failed naming cp-9", k2.Status.Phase, k2.Status.Message)
	}
	// More machines come: the cluster takes them.
	h.machine("cp-2", "role", "cp")
	h.machine("cp-3", "role", "cp")
	h.machine("dp-2", "role", "dp")
	h.pass()
	if kc := h.cluster("k1"); strings.Contains(kc.Status.Message, "missing") || len(h.claims()) != 5 {
		t.Fatalf("k1 %q, claims %v", kc.Status.Message, h.claims())
	}
}

// TestCompetingClustersOneWinsPerMachine: two clusters want two of three
// machines; the older claims first, the other gets what is left and waits
// for the rest. No machine is held by both.
func TestCompetingClustersOneWinsPerMachine(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	for i := 1; i <= 3; i++ {
		h.machine(fmt.Sprintf("cp-%d", i), "role", "cp")
	}
	h.create(selectorCluster("a", 2, 0))
	h.create(selectorCluster("b", 2, 0))
	h.pass()
	h.pass()
	claims := h.claims()
	if claims["cp-1"] != "a" || claims["cp-2"] != "a" || claims["cp-3"] != "b" {
		t.Fatalf("claims %v, want cp-1 and cp-2 for a, cp-3 for b", claims)
	}
	b := h.cluster("b")
	if !strings.Contains(b.Status.Message, "1 machine missing") {
		t.Fatalf("b: %q, want 1 machine missing", b.Status.Message)
	}
	for _, cfg := range h.configs() {
		if want := claims[cfg.Metadata.Name]; !kubeplan.OwnedBy(cfg.Metadata.OwnerReferences, want) {
			t.Errorf("%s configured for %+v, claimed by %s", cfg.Metadata.Name, cfg.Metadata.OwnerReferences, want)
		}
	}
}

// readyThenDelete makes cluster name of one control-plane machine (cp-1)
// and one data-plane machine (dp-1), every component probing healthy,
// reconciles it to Ready and marks it deleted.
func (h *kcHarness) readyThenDelete(name string) {
	h.t.Helper()
	h.machine("cp-1", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster(name, 1, 1))
	for i := 0; i < 10 && h.cluster(name).Status.Phase != api.ClusterReady; i++ {
		h.pass()
	}
	if p := h.cluster(name).Status.Phase; p != api.ClusterReady {
		h.t.Fatalf("phase %s, want Ready before deleting", p)
	}
	kc := h.cluster(name)
	at := h.now
	kc.Metadata.DeletionTimestamp = &at
	if err := h.st.UpdateObject(h.t.Context(), kc); err != nil {
		h.t.Fatal(err)
	}
}

// TestClusterDeletion: deleting a Ready cluster releases its machines
// (a Rollout to onRemoveFlake, then their configurations go: no
// configuration left), drops the claims, deletes the secrets, the
// rollouts and the cluster, with phase Deleting meanwhile.
func TestClusterDeletion(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.readyThenDelete("k1")
	var sawDeleting, sawMinimal bool
	for i := 0; i < 15 && h.cluster("k1") != nil; i++ {
		h.pass()
		if kc := h.cluster("k1"); kc != nil && kc.Status.Phase == api.ClusterDeleting {
			sawDeleting = true
		}
		for _, r := range h.rollouts() {
			if r.Spec.DeleteConfigurations && r.Spec.Templates["cp-1"].Flake == "#minimal" {
				sawMinimal = true
			}
		}
	}
	if h.cluster("k1") != nil {
		t.Fatalf("cluster still there: %+v", h.cluster("k1").Status)
	}
	if !sawDeleting || !sawMinimal {
		t.Errorf("saw phase Deleting %v, a release rollout to #minimal %v", sawDeleting, sawMinimal)
	}
	if n := len(h.configs()); n != 0 {
		t.Errorf("%d configurations left, want none (machines back to hasConfiguration false)", n)
	}
	if c := h.claims(); len(c) != 0 {
		t.Errorf("claims left: %v", c)
	}
	if rs := h.rollouts(); len(rs) != 0 {
		t.Errorf("%d rollouts left", len(rs))
	}
	if !slices.Equal(h.secrets.deleted, []string{"k1"}) {
		t.Errorf("secrets deleted for %v, want k1", h.secrets.deleted)
	}
	_ = time.Second
}

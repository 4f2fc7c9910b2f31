package coordinator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/store"
)

// TestClaimRace: two clusters' passes, both having read no claim, claim
// the same three machines at once against real etcd: each machine ends up
// held by exactly one, and each pass keeps only what it won.
func TestClaimRace(t *testing.T) {
	h := newKCHarness(t)
	machines := []string{"m-1", "m-2", "m-3"}
	for _, m := range machines {
		h.machine(m)
	}
	a, b := selectorCluster("a", 3, 0), selectorCluster("b", 3, 0)
	for round := range 10 {
		if _, err := h.st.Client().Delete(t.Context(), store.ClusterClaimsDir, clientv3WithPrefix()...); err != nil {
			t.Fatal(err)
		}
		fa, err := readClusterFleet(t.Context(), h.st)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := readClusterFleet(t.Context(), h.st)
		if err != nil {
			t.Fatal(err)
		}
		want := kubeplan.Selection{ControlPlane: slices.Clone(machines)}
		var wg sync.WaitGroup
		var selA, selB kubeplan.Selection
		var errA, errB error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; selA, errA = h.cc.claim(context.Background(), fa, a, want) }()
		go func() {
			defer wg.Done()
			<-start
			selB, errB = h.cc.claim(context.Background(), fb, b, kubeplan.Selection{ControlPlane: slices.Clone(machines)})
		}()
		close(start)
		wg.Wait()
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		claims := h.claims()
		for _, m := range machines {
			inA, inB := slices.Contains(selA.ControlPlane, m), slices.Contains(selB.ControlPlane, m)
			if inA == inB {
				t.Fatalf("round %d: %s in a's selection %v, in b's %v", round, m, inA, inB)
			}
			if (inA && claims[m] != "a") || (inB && claims[m] != "b") {
				t.Fatalf("round %d: %s claimed by %q; a has it %v", round, m, claims[m], inA)
			}
			if (inA && !slices.Contains(selB.Held, m)) || (inB && !slices.Contains(selA.Held, m)) {
				t.Fatalf("round %d: the loser does not see %s held: a %+v b %+v", round, m, selA, selB)
			}
		}
	}
}

// TestVersionChangeRollsControlPlaneFirst: on a Ready cluster, a change of
// version rolls the control plane first; another change rolls the data
// plane first.
func TestVersionChangeRollsControlPlaneFirst(t *testing.T) {
	h := newKCHarness(t)
	h.machine("cp-1", "role", "cp")
	h.machine("cp-2", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 2, 1))
	h.untilPhase(api.ClusterReady)
	next := func(mod func(*api.KubernetesCluster)) *api.Rollout {
		t.Helper()
		kc := h.cluster("k1")
		mod(kc)
		kc.Metadata.Generation++
		if err := h.st.UpdateObject(t.Context(), kc); err != nil {
			t.Fatal(err)
		}
		before := len(h.rollouts())
		seen := map[string]bool{}
		for _, r := range h.rollouts() {
			seen[r.Metadata.Name] = true
		}
		h.hold["cp-1"], h.hold["cp-2"], h.hold["dp-1"] = true, true, true // the first rollout stays in flight
		h.pass()
		h.hold = map[string]bool{}
		for _, r := range h.rollouts() {
			if !seen[r.Metadata.Name] {
				return r
			}
		}
		t.Fatalf("no new rollout (had %d)", before)
		return nil
	}
	r := next(func(kc *api.KubernetesCluster) { kc.Spec.Version = "1.37.3" })
	if !slices.Equal(r.Spec.Nodes, []string{"cp-1", "cp-2"}) || !r.Spec.ControlPlaneFirst {
		t.Fatalf("version change: rollout of %v cpFirst=%v, want the control plane first", r.Spec.Nodes, r.Spec.ControlPlaneFirst)
	}
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	if v := h.cluster("k1").Status.Version; v != "1.37.3" {
		t.Fatalf("status.version %q after the roll", v)
	}
	r = next(func(kc *api.KubernetesCluster) { kc.Spec.ConfigurationSubdir = "k8s" })
	if !slices.Equal(r.Spec.Nodes, []string{"dp-1"}) {
		t.Fatalf("other change: rollout of %v, want the data plane first", r.Spec.Nodes)
	}
	if g := h.cluster("k1").Status.ObservedGeneration; g != 3 {
		t.Fatalf("observedGeneration %d, want 3", g)
	}
}

// TestRemovedMachineIsDrainedThenReleased: a machine taken out of the
// cluster's list is drained (the hook) before its release rollout, then
// switched to onRemoveFlake, its configuration deleted, and unclaimed.
func TestRemovedMachineIsDrainedThenReleased(t *testing.T) {
	h := newKCHarness(t)
	var drained []string
	h.c.Clusters.Drain = func(_ context.Context, c *api.KubernetesCluster, m string) error {
		if slices.ContainsFunc(h.rollouts(), func(r *api.Rollout) bool { return r.Spec.DeleteConfigurations }) {
			t.Errorf("drain of %s after its release rollout was written", m)
		}
		drained = append(drained, c.Metadata.Name+"/"+m)
		return nil
	}
	for _, m := range []string{"cp-1", "dp-1", "dp-2"} {
		h.machine(m)
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	kc.Spec.DataPlane.Machines = []string{"dp-1", "dp-2"}
	kc.Spec.Drain = &api.DrainHook{Command: []string{"kubectl", "drain"}}
	h.create(kc)
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	kc = h.cluster("k1")
	kc.Spec.DataPlane.Machines = []string{"dp-1"}
	kc.Metadata.Generation++
	if err := h.st.UpdateObject(t.Context(), kc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10 && h.claims()["dp-2"] != ""; i++ {
		h.pass()
	}
	if c := h.claims(); c["dp-2"] != "" || c["dp-1"] != "k1" {
		t.Fatalf("claims %v, want dp-2 released", c)
	}
	if !slices.Equal(h.secrets.released, []string{"k1/dp-2"}) {
		t.Fatalf("secrets released for %v, want k1/dp-2", h.secrets.released)
	}
	if !slices.Equal(drained, []string{"k1/dp-2"}) {
		t.Fatalf("drained %v, want k1/dp-2", drained)
	}
	if cfg := h.config("dp-2"); cfg != nil {
		t.Fatalf("dp-2 still has a configuration: %+v", cfg.Spec)
	}
	h.untilInSync()
	if s := h.cluster("k1").Status; s.Phase != api.ClusterReady || !slices.Equal(s.DataPlane.Machines, []string{"dp-1"}) {
		t.Fatalf("status %s %+v", s.Phase, s.DataPlane)
	}
}

// untilPhase runs passes until the cluster k1 is in phase p.
func (h *kcHarness) untilPhase(p api.ClusterPhase) {
	h.t.Helper()
	for range 20 {
		h.pass()
		if h.cluster("k1").Status.Phase == p {
			return
		}
	}
	h.t.Fatalf("k1 never %s: %+v", p, h.cluster("k1").Status)
}

// untilInSync runs passes until no rollout of k1 is unfinished and every
// machine runs its configuration.
func (h *kcHarness) untilInSync() {
	h.t.Helper()
	for range 20 {
		h.pass()
		kc := h.cluster("k1")
		if kc.Status.Version == kc.Spec.Version && !slices.ContainsFunc(h.rollouts(), func(r *api.Rollout) bool { return !r.Status.Phase.Finished() }) {
			h.pass()
			if kc := h.cluster("k1"); kc.Status.Version == kc.Spec.Version {
				return
			}
		}
	}
	h.t.Fatalf("k1 never in sync: %+v", h.cluster("k1").Status)
}

// TestComponentsFollowTheReports: a component reported unhealthy turns
// its condition false and the cluster back to Provisioning, naming the
// machine and the reason; reports older than three probe intervals count
// as none.
func TestComponentsFollowTheReports(t *testing.T) {
	h := newKCHarness(t)
	h.machine("cp-1", "role", "cp")
	h.machine("cp-2", "role", "cp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 2, 0))
	h.untilPhase(api.ClusterReady)
	h.unhealthy["cp-2/"+api.ComponentScheduler] = true
	h.pass()
	h.pass()
	kc := h.cluster("k1")
	c := api.FindClusterCondition(kc.Status.Conditions, api.CondSchedulerReady)
	if kc.Status.Phase != api.ClusterProvisioning || c.Status != api.ConditionFalse || !strings.Contains(c.Message, "cp-2: healthz: 500") {
		t.Fatalf("phase %s scheduler %+v", kc.Status.Phase, c)
	}
	if api.FindClusterCondition(kc.Status.Conditions, api.CondAPIServerReady).Status != api.ConditionTrue {
		t.Fatal("the API servers' condition fell with the scheduler's")
	}
	h.unhealthy = map[string]bool{}
	h.untilPhase(api.ClusterReady)
	h.silent = true
	h.now = h.now.Add(31 * time.Second) // past 3 x the default 10s interval
	h.pass()
	kc = h.cluster("k1")
	if c := api.FindClusterCondition(kc.Status.Conditions, api.CondAPIServerReady); c.Status != api.ConditionFalse || !strings.Contains(c.Message, "not reported yet") {
		t.Fatalf("stale reports: %+v", c)
	}
}

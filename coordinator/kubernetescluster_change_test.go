package coordinator

import (
	"context"
	"errors"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestDistributionServersJoinOneAtATime: with etcd provider distribution,
// the first server in cluster.nix is the one the control plane's rollout
// starts with, and the servers roll one at a time.
func TestDistributionServersJoinOneAtATime(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	for _, m := range []string{"cp-1", "cp-2", "cp-10"} {
		h.machine(m)
	}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-10", "cp-2", "cp-1"}
	kc.Spec.Etcd.Provider = api.EtcdProviderDistribution
	kc.Spec.Rollout.MaxUnavailable = "3"
	h.create(kc)
	h.hold = map[string]bool{"cp-1": true, "cp-2": true, "cp-10": true}
	h.pass()
	rs := h.rollouts()
	if len(rs) != 1 || rs[0].Spec.MaxUnavailable != "1" {
		t.Fatalf("rollouts %+v, want one, one machine at a time", rs)
	}
	nix := rs[0].Spec.Templates["cp-10"].AdditionalFiles[0].Inline
	if !strings.Contains(nix, `firstServer = "cp-1";`) {
		t.Fatalf("cluster.nix:\n%s\nwant firstServer cp-1", nix)
	}
	if cur := rs[0].Status.Current; !slices.Equal(cur, []string{"cp-1"}) {
		t.Fatalf("the rollout started with %v, want cp-1", cur)
	}
}

// TestRolloutNameTakenIsSkipped: a rollout someone else named like the
// cluster's next one does not stop the cluster: it takes the next name.
func TestRolloutNameTakenIsSkipped(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1")
	other := api.NewRollout("k1-1")
	other.Status.Phase = api.RolloutSucceeded
	if err := h.st.PutObject(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	h.create(kc)
	h.hold["cp-1"] = true
	h.pass()
	var names []string
	for _, r := range h.rollouts() {
		names = append(names, r.Metadata.Name)
	}
	if !slices.Equal(names, []string{"k1-1", "k1-2"}) {
		t.Fatalf("rollouts %v, want the cluster's as k1-2 beside the other k1-1", names)
	}
}

// TestDeposedLeaderWritesNothing: a cluster pass under a fence that no
// longer holds ends with store.ErrNotLeader (the term ends) and writes no
// claim, rollout or status; the leader's next pass does.
func TestDeposedLeaderWritesNothing(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1")
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	h.create(kc)
	deposed := testClusterController(h.c, store.Fence{Key: store.ElectionPrefix + "gone", Rev: 1})
	if err := deposed.reconcile(t.Context()); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("deposed pass: %v, want ErrNotLeader", err)
	}
	if c, r, st := h.claims(), h.rollouts(), h.cluster("k1").Status; len(c) != 0 || len(r) != 0 || st.Phase != "" {
		t.Fatalf("a deposed leader wrote: claims %v, %d rollouts, status %+v", c, len(r), st)
	}
	h.pass()
	if c := h.claims(); c["cp-1"] != "k1" || len(h.rollouts()) != 1 {
		t.Fatalf("the leader's pass: claims %v, %d rollouts", c, len(h.rollouts()))
	}
}

// TestMachineGoneFromTheFleetIsUnclaimed: a machine the cluster holds
// whose node left the fleet is not rolled (a rollout would halt on it):
// its claim is dropped and the cluster takes another.
func TestMachineGoneFromTheFleetIsUnclaimed(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1", "role", "cp")
	h.machine("cp-2", "role", "cp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 1, 0))
	h.untilPhase(api.ClusterReady)
	n := api.NewNode("cp-1")
	if err := h.st.Get(t.Context(), store.NodeKey("cp-1"), n); err != nil {
		t.Fatal(err)
	}
	n.Status.Phase = api.NodeRemoved
	if err := h.st.UpdateObject(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	h.pass()
	h.pass()
	if c := h.claims(); c["cp-1"] != "" || c["cp-2"] != "k1" {
		t.Fatalf("claims %v, want cp-1 dropped and cp-2 taken", c)
	}
	for _, r := range h.rollouts() {
		if slices.Contains(r.Spec.Nodes, "cp-1") && r.Spec.DeleteConfigurations {
			t.Fatalf("a release rollout of the removed cp-1: %+v", r.Spec)
		}
	}
	h.untilPhase(api.ClusterReady)
}

// TestPauseFollowsTheCluster: spec.rollout.paused reaches the cluster's
// rollout, the one in flight too.
func TestPauseFollowsTheCluster(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("cp-1")
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	kc.Spec.Rollout.Paused = true
	h.create(kc)
	h.pass()
	rs := h.rollouts()
	if len(rs) != 1 || !rs[0].Spec.Paused || rs[0].Status.Phase != api.RolloutPaused {
		t.Fatalf("rollouts %+v, want one, paused", rs)
	}
	kc = h.cluster("k1")
	kc.Spec.Rollout.Paused = false
	kc.Metadata.Generation++
	if err := h.st.UpdateObject(t.Context(), kc); err != nil {
		t.Fatal(err)
	}
	h.pass()
	h.pass()
	if r := h.rollouts()[0]; r.Spec.Paused || r.Status.Phase == api.RolloutPaused {
		t.Fatalf("rollout after resume: paused %v phase %s", r.Spec.Paused, r.Status.Phase)
	}
}

package coordinator

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// drainCluster is k1 over cp-1 and dp-1, dp-2 with spec.drain, Ready and in
// sync, its agents playing the drain runner with h.drain.
func drainCluster(t *testing.T, run func(*api.DrainRequest) api.DrainRequestStatus) *kcHarness {
	t.Helper()
	h := newKCHarness(t)
	h.drain = run
	for _, m := range []string{"cp-1", "dp-1", "dp-2"} {
		h.machine(m)
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	kc.Spec.DataPlane.Machines = []string{"dp-1", "dp-2"}
	kc.Spec.Drain = &api.DrainHook{Command: []string{"kubectl", "drain", "--broken"}, Timeout: api.Duration(time.Minute)}
	h.create(kc)
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	return h
}

// update changes k1's spec as a person's apply would.
func (h *kcHarness) update(change func(*api.KubernetesCluster)) {
	h.t.Helper()
	kc := h.cluster("k1")
	change(kc)
	kc.Metadata.Generation++
	if err := h.st.UpdateObject(h.t.Context(), kc); err != nil {
		h.t.Fatal(err)
	}
}

func (h *kcHarness) drainRequest(m string) *api.DrainRequest {
	h.t.Helper()
	r := api.NewDrainRequest(m)
	if err := h.st.Get(h.t.Context(), store.DrainRequestKey(m), r); err != nil {
		return nil
	}
	return r
}

func releaseRollouts(h *kcHarness) []*api.Rollout {
	return slices.DeleteFunc(h.rollouts(), func(r *api.Rollout) bool { return !r.Spec.DeleteConfigurations })
}

// TestRemovedMachineIsDrainedThenReleased: a machine taken out of the
// cluster's list gets a drain request run by the ready control-plane
// machine, with the cluster's command, timeout and KUBECONFIG; only once
// it succeeded is the release rollout written, the machine switched to
// onRemoveFlake, its configuration deleted, unclaimed and its request
// gone; MachinesDrained is true.
func TestRemovedMachineIsDrainedThenReleased(t *testing.T) {
	t.Parallel()
	var asked []*api.DrainRequest
	var h *kcHarness
	h = drainCluster(t, func(r *api.DrainRequest) api.DrainRequestStatus {
		if len(releaseRollouts(h)) > 0 {
			t.Errorf("drain of %s asked after its release rollout", r.Spec.Machine)
		}
		asked = append(asked, r)
		return api.DrainRequestStatus{Phase: api.DrainSucceeded, Output: "node/dp-2 drained"}
	})
	h.update(func(kc *api.KubernetesCluster) {
		kc.Spec.DataPlane.Machines = []string{"dp-1"}
		kc.Spec.Kubeconfig.Path = "/etc/rancher/k3s/k3s.yaml"
	})
	for i := 0; i < 10 && h.claims()["dp-2"] != ""; i++ {
		h.pass()
	}
	if len(asked) != 1 {
		t.Fatalf("drains asked: %d, want 1", len(asked))
	}
	if s := asked[0].Spec; s.Machine != "dp-2" || s.Runner != "cp-1" || s.Cluster != "k1" || s.Attempt != 1 ||
		!slices.Equal(s.Command, []string{"kubectl", "drain", "--broken"}) || s.TimeoutOrDefault() != time.Minute || s.Kubeconfig != "/etc/rancher/k3s/k3s.yaml" {
		t.Fatalf("drain request %+v", s)
	}
	if c := h.claims(); c["dp-2"] != "" || c["dp-1"] != "k1" {
		t.Fatalf("claims %v, want dp-2 released", c)
	}
	if cfg := h.config("dp-2"); cfg != nil {
		t.Fatalf("dp-2 still has a configuration: %+v", cfg.Spec)
	}
	h.pass()
	if r := h.drainRequest("dp-2"); r != nil {
		t.Fatalf("dp-2's drain request left after its release: %+v", r)
	}
	h.untilInSync()
	s := h.cluster("k1").Status
	if s.Phase != api.ClusterReady || !slices.Equal(s.DataPlane.Machines, []string{"dp-1"}) {
		t.Fatalf("status %s %+v", s.Phase, s.DataPlane)
	}
	if c := api.FindClusterCondition(s.Conditions, api.CondMachinesDrained); c == nil || c.Status != api.ConditionTrue || !strings.Contains(c.Message, "dp-2") {
		t.Fatalf("MachinesDrained %+v", c)
	}
}

// TestFailedDrainHoldsTheMachine: a drain that exits non-zero, and one
// that times out, leave the machine in the cluster (claimed, running the
// cluster's configuration, no release rollout) with MachinesDrained false
// naming the machine, the exit code (or the timeout) and the output's
// tail; the same command is not run again within its backoff
// (TestFailedDrainIsRetriedWithBackoff); once spec.drain.command is
// fixed, a new attempt runs and the machine is released.
func TestFailedDrainHoldsTheMachine(t *testing.T) {
	t.Parallel()
	results := []api.DrainRequestStatus{
		{Phase: api.DrainFailed, ExitCode: 3, Output: "error: cannot evict pod default/web-1: disruption budget"},
		{Phase: api.DrainFailed, ExitCode: -1, TimedOut: true, Output: "evicting pod default/web-1"},
		{Phase: api.DrainSucceeded, Output: "node/dp-2 drained"},
	}
	var asked []*api.DrainRequest
	h := drainCluster(t, func(r *api.DrainRequest) api.DrainRequestStatus {
		asked = append(asked, r)
		return results[len(asked)-1]
	})
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1"} })
	held := func(want ...string) {
		t.Helper()
		for range 5 {
			h.pass()
		}
		if c := h.claims(); c["dp-2"] != "k1" {
			t.Fatalf("claims %v: dp-2 released after a failed drain", c)
		}
		if cfg := h.config("dp-2"); cfg == nil || cfg.Spec.Flake == "#minimal" {
			t.Fatalf("dp-2's configuration after a failed drain: %+v", cfg)
		}
		if r := releaseRollouts(h); len(r) > 0 {
			t.Fatalf("release rollout %s written after a failed drain", r[0].Metadata.Name)
		}
		c := api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondMachinesDrained)
		if c == nil || c.Status != api.ConditionFalse || c.Reason != api.ReasonDrainFailed {
			t.Fatalf("MachinesDrained %+v, want False, %s", c, api.ReasonDrainFailed)
		}
		for _, w := range append([]string{"dp-2", "cp-1"}, want...) {
			if !strings.Contains(c.Message, w) {
				t.Errorf("MachinesDrained message %q does not say %q", c.Message, w)
			}
		}
	}
	held("exit code 3", "cannot evict pod default/web-1")
	if len(asked) != 1 {
		t.Fatalf("the failed command was asked %d times, want once", len(asked))
	}

	// Fixed, but too slow: it times out.
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.Drain.Command = []string{"kubectl", "drain", "--force"} })
	held("timed out after 1m0s", "evicting pod default/web-1")
	if len(asked) != 2 || asked[1].Spec.Attempt != 2 || !slices.Equal(asked[1].Spec.Command, []string{"kubectl", "drain", "--force"}) {
		t.Fatalf("after the fix: %d asks, last %+v", len(asked), asked[len(asked)-1].Spec)
	}

	// A longer timeout: drained, released.
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.Drain.Timeout = api.Duration(5 * time.Minute) })
	for i := 0; i < 10 && h.claims()["dp-2"] != ""; i++ {
		h.pass()
	}
	if len(asked) != 3 || asked[2].Spec.Attempt != 3 {
		t.Fatalf("asks %d, want a third attempt", len(asked))
	}
	if c := h.claims(); c["dp-2"] != "" {
		t.Fatalf("claims %v after the drain succeeded", c)
	}
	h.untilInSync()
	if c := api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondMachinesDrained); c == nil || c.Status != api.ConditionTrue {
		t.Fatalf("MachinesDrained %+v after the retry", c)
	}
}

// TestTakenBackMachineDropsItsDrain: a machine whose drain failed is put
// back in the list: its request is dropped and it stays in the cluster.
func TestTakenBackMachineDropsItsDrain(t *testing.T) {
	t.Parallel()
	h := drainCluster(t, func(*api.DrainRequest) api.DrainRequestStatus {
		return api.DrainRequestStatus{Phase: api.DrainFailed, ExitCode: 1}
	})
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1"} })
	for range 3 {
		h.pass()
	}
	if h.drainRequest("dp-2") == nil {
		t.Fatal("no drain request for dp-2")
	}
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1", "dp-2"} })
	h.pass()
	h.untilInSync()
	if r := h.drainRequest("dp-2"); r != nil {
		t.Fatalf("dp-2 taken back, its drain request kept: %+v", r.Spec)
	}
	if c := h.claims(); c["dp-2"] != "k1" {
		t.Fatalf("claims %v", c)
	}
	if c := api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondMachinesDrained); c == nil || c.Status != api.ConditionTrue {
		t.Fatalf("MachinesDrained %+v once nothing is left to drain", c)
	}
}

// TestDeletedClusterDrainsItsMachines: deleting a cluster with spec.drain
// drains every machine, on the control-plane machine while it still runs
// the cluster, before the release rollout.
func TestDeletedClusterDrainsItsMachines(t *testing.T) {
	t.Parallel()
	var asked []string
	var h *kcHarness
	h = drainCluster(t, func(r *api.DrainRequest) api.DrainRequestStatus {
		if len(releaseRollouts(h)) > 0 {
			t.Errorf("drain of %s asked after the release rollout", r.Spec.Machine)
		}
		asked = append(asked, r.Spec.Machine+"@"+r.Spec.Runner)
		return api.DrainRequestStatus{Phase: api.DrainSucceeded}
	})
	kc := h.cluster("k1")
	at := h.now
	kc.Metadata.DeletionTimestamp = &at
	if err := h.st.UpdateObject(t.Context(), kc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && h.cluster("k1") != nil; i++ {
		h.pass()
	}
	if h.cluster("k1") != nil {
		t.Fatalf("k1 not deleted: %+v", h.cluster("k1").Status)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"cp-1@cp-1", "dp-1@cp-1", "dp-2@cp-1"}) {
		t.Fatalf("drained %v, want every machine on cp-1", asked)
	}
	if reqs, _, _ := store.List[api.DrainRequest](t.Context(), h.st, store.DrainRequestsDir); len(reqs) != 0 {
		t.Fatalf("%d drain requests left after the deletion", len(reqs))
	}
}

// TestDeposedLeaderAsksNoDrain: a pass under a fence that no longer
// holds writes no drain request (ErrNotLeader); the leader's does.
func TestDeposedLeaderAsksNoDrain(t *testing.T) {
	t.Parallel()
	h := drainCluster(t, nil)
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1"} })
	for i := 0; i < 10 && h.drainRequest("dp-2") == nil; i++ {
		h.pass()
	}
	// The leader asked; the request gone, a deposed leader would ask again.
	if err := h.st.Delete(t.Context(), store.DrainRequestKey("dp-2")); err != nil {
		t.Fatal(err)
	}
	deposed := testClusterController(h.c, store.Fence{Key: store.ElectionPrefix + "gone", Rev: 1})
	if err := deposed.reconcile(t.Context()); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("deposed pass: %v, want ErrNotLeader", err)
	}
	if r := h.drainRequest("dp-2"); r != nil {
		t.Fatalf("a deposed leader asked a drain: %+v", r.Spec)
	}
	h.pass()
	if r := h.drainRequest("dp-2"); r == nil || r.Spec.Runner != "cp-1" {
		t.Fatalf("the leader's pass: drain request %+v", r)
	}
}

// passFor runs passes until d of the clock passed, a few seconds apart
// (the agents' reports stay fresh).
func (h *kcHarness) passFor(d time.Duration) {
	h.t.Helper()
	for end := h.now.Add(d); h.now.Before(end); {
		h.now = h.now.Add(4 * time.Second) // pass adds one more
		h.pass()
	}
}

// TestFailedDrainIsRetriedWithBackoff (real etcd, injected clock): a
// drain a disruption budget blocks is asked again, unchanged, 30s after
// it failed, then 1m after the second failure (not before), with the
// attempt count and the next try in MachinesDrained (a message that
// stays the same while it waits); once it succeeds
// the machine is released.
func TestFailedDrainIsRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	blocked := api.DrainRequestStatus{Phase: api.DrainFailed, ExitCode: 1, Output: "error: cannot evict pod default/web-1: disruption budget"}
	results := []api.DrainRequestStatus{blocked, blocked, {Phase: api.DrainSucceeded, Output: "node/dp-2 drained"}}
	var asked []*api.DrainRequest
	var askedAt []time.Time
	var h *kcHarness
	h = drainCluster(t, func(r *api.DrainRequest) api.DrainRequestStatus {
		asked, askedAt = append(asked, r), append(askedAt, h.now)
		return results[min(len(asked), len(results))-1]
	})
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1"} })
	for i := 0; i < 10 && len(asked) == 0; i++ {
		h.pass()
	}
	if len(asked) != 1 {
		t.Fatalf("drains asked: %d, want 1", len(asked))
	}
	cond := func() *api.ClusterCondition {
		return api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondMachinesDrained)
	}
	h.pass()
	if c := cond(); c == nil || c.Reason != api.ReasonDrainFailed || !strings.Contains(c.Message, "(attempt 1) failed") ||
		!strings.Contains(c.Message, "attempt 2 at "+askedAt[0].Add(30*time.Second).Format(time.RFC3339)) {
		t.Fatalf("MachinesDrained after the first failure: %+v", c)
	}
	first := cond().Message
	h.passFor(20 * time.Second)
	if len(asked) != 1 {
		t.Fatalf("retried %s after the failure, before its 30s backoff", h.now.Sub(askedAt[0]))
	}
	if c := cond(); c.Message != first {
		t.Fatalf("MachinesDrained message changed while waiting: %q, then %q", first, c.Message)
	}
	h.passFor(15 * time.Second)
	if len(asked) != 2 {
		t.Fatalf("not retried %s after the failure: %d asks", h.now.Sub(askedAt[0]), len(asked))
	}
	if s := asked[1].Spec; s.Attempt != 2 || s.Retry != 1 || !slices.Equal(s.Command, asked[0].Spec.Command) {
		t.Fatalf("retry %+v", s)
	}
	h.pass()
	if c := cond(); c == nil || !strings.Contains(c.Message, "(attempt 2) failed") ||
		!strings.Contains(c.Message, "attempt 3 at "+askedAt[1].Add(time.Minute).Format(time.RFC3339)) {
		t.Fatalf("MachinesDrained after the second failure: %+v", c)
	}
	h.passFor(45 * time.Second)
	if len(asked) != 2 {
		t.Fatalf("retried %s after the second failure, before its 1m backoff", h.now.Sub(askedAt[1]))
	}
	h.passFor(20 * time.Second)
	if len(asked) != 3 || asked[2].Spec.Retry != 2 {
		t.Fatalf("not retried a third time %s after the second failure: %d asks", h.now.Sub(askedAt[1]), len(asked))
	}
	for i := 0; i < 10 && h.claims()["dp-2"] != ""; i++ {
		h.pass()
	}
	if c := h.claims(); c["dp-2"] != "" {
		t.Fatalf("claims %v after the retried drain succeeded", c)
	}
	h.untilInSync()
	if c := cond(); c == nil || c.Status != api.ConditionTrue {
		t.Fatalf("MachinesDrained %+v after the retry", c)
	}
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/store"
)

// fakeClusterAPI is the memory fake of ClusterAPI: the Nodes a test sets,
// and a record of what it was asked.
type fakeClusterAPI struct {
	mu           sync.Mutex
	nodes        map[string]kubeplan.NodeState
	nodesErr     error
	bootErr      error
	bootstrapped int
	deleted      []string
}

func (a *fakeClusterAPI) Bootstrap(context.Context, store.Fence, *api.KubernetesCluster) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bootErr != nil {
		return a.bootErr
	}
	a.bootstrapped++
	return nil
}

func (a *fakeClusterAPI) Nodes(context.Context, *api.KubernetesCluster) (map[string]kubeplan.NodeState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nodesErr != nil {
		return nil, a.nodesErr
	}
	out := map[string]kubeplan.NodeState{}
	for k, v := range a.nodes {
		out[k] = v
	}
	return out, nil
}

func (a *fakeClusterAPI) DeleteNode(_ context.Context, _ store.Fence, _ *api.KubernetesCluster, m string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deleted = append(a.deleted, m)
	delete(a.nodes, m)
	return nil
}

func (a *fakeClusterAPI) set(m string, n kubeplan.NodeState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nodes[m] = n
}

// TestClusterReadyFromNodes: with the cluster's API reached, a data-plane
// machine that runs the cluster's configuration counts as ready only once
// its Node is Ready; DataPlaneReady names each machine whose Node is
// missing or NotReady with the kubelet's reason, the cluster turns Ready
// only when every Node is; the bootstrap token is registered only once
// the API servers are ready; a released machine's Node is deleted before
// its claim is dropped.
func TestClusterReadyFromNodes(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	fake := &fakeClusterAPI{nodes: map[string]kubeplan.NodeState{}}
	h.c.cfg.Clusters.API = fake
	for _, m := range []string{"cp-1", "dp-1", "dp-2"} {
		h.machine(m)
	}
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{Machines: []string{"cp-1"}}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{Machines: []string{"dp-1", "dp-2"}}
	h.create(kc)

	h.pass()
	if fake.bootstrapped != 0 {
		t.Fatalf("bootstrap token registered before the API servers were ready")
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	dpCond := func() *api.ClusterCondition {
		return api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondDataPlaneReady)
	}
	for range 20 {
		h.pass()
		if c := dpCond(); c != nil && c.Reason == kubeplan.ReasonNodeNotReady {
			break
		}
	}
	got := h.cluster("k1")
	c := dpCond()
	if got.Status.Phase != api.ClusterProvisioning || c == nil || c.Status != api.ConditionFalse ||
		!strings.Contains(c.Message, "dp-1: Node not registered") || !strings.Contains(c.Message, "dp-2: Node not registered") {
		t.Fatalf("no Nodes: phase %s, DataPlaneReady %+v", got.Status.Phase, c)
	}
	if got.Status.DataPlane.Ready != 0 || len(got.Status.DataPlane.ReadyMachines) != 0 {
		t.Fatalf("no Nodes, yet data plane %+v", got.Status.DataPlane)
	}
	if fake.bootstrapped == 0 {
		t.Fatal("bootstrap token not registered once the API servers were ready")
	}

	fake.set("dp-1", kubeplan.NodeState{Ready: true, Status: "True", Reason: "KubeletReady"})
	fake.set("dp-2", kubeplan.NodeState{Status: "False", Reason: "KubeletNotReady", Message: "container runtime network not ready: cni plugin not initialized"})
	h.pass()
	got, c = h.cluster("k1"), dpCond()
	if got.Status.Phase != api.ClusterProvisioning || !slices.Equal(got.Status.DataPlane.ReadyMachines, []string{"dp-1"}) ||
		!strings.Contains(c.Message, "dp-2: Node NotReady: KubeletNotReady: container runtime network not ready") || strings.Contains(c.Message, "dp-1:") {
		t.Fatalf("dp-2 NotReady: phase %s, data plane %+v, DataPlaneReady %+v", got.Status.Phase, got.Status.DataPlane, c)
	}
	if !strings.Contains(got.Status.Message, "dp-2: Node NotReady") {
		t.Fatalf("the cluster's message does not name dp-2: %q", got.Status.Message)
	}

	fake.set("dp-2", kubeplan.NodeState{Ready: true, Status: "True", Reason: "KubeletReady"})
	h.untilPhase(api.ClusterReady)
	if got := h.cluster("k1"); got.Status.DataPlane.Ready != 2 {
		t.Fatalf("Ready with data plane %+v", got.Status.DataPlane)
	}

	// The API stops answering: the data plane is no longer counted ready.
	fake.mu.Lock()
	fake.nodesErr = errors.New("dial tcp 10.0.0.1:6443: connection refused")
	fake.mu.Unlock()
	h.pass()
	if c := dpCond(); c.Status != api.ConditionFalse || !strings.Contains(c.Message, "Nodes not read: dial tcp") {
		t.Fatalf("Nodes unreadable: DataPlaneReady %+v", c)
	}
	fake.mu.Lock()
	fake.nodesErr = nil
	fake.mu.Unlock()

	// dp-2 leaves the cluster: its Node goes, then its claim.
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = []string{"dp-1"} })
	for range 20 {
		h.pass()
		if _, held := h.claims()["dp-2"]; !held {
			break
		}
	}
	if _, held := h.claims()["dp-2"]; held {
		t.Fatalf("dp-2 still claimed")
	}
	if !slices.Equal(fake.deleted, []string{"dp-2"}) {
		t.Fatalf("Nodes deleted %v, want [dp-2]", fake.deleted)
	}
	h.untilPhase(api.ClusterReady)
}

// TestBootstrapRetried: a failed registration of the bootstrap token
// fails the pass (the runtime retries it with backoff) after the status
// is written; the next pass registers it.
func TestBootstrapRetried(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	fake := &fakeClusterAPI{nodes: map[string]kubeplan.NodeState{"dp-1": {Ready: true, Status: "True"}}}
	h.c.cfg.Clusters.API = fake
	h.machine("cp-1")
	h.machine("dp-1")
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{Machines: []string{"cp-1"}}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{Machines: []string{"dp-1"}}
	h.create(kc)
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.untilPhase(api.ClusterReady)

	fake.mu.Lock()
	fake.bootErr = errors.New("the server is currently unable to handle the request")
	fake.mu.Unlock()
	h.now = h.now.Add(1)
	if err := h.cc.reconcile(t.Context()); err == nil || !strings.Contains(err.Error(), "unable to handle the request") {
		t.Fatalf("pass with the registration failing: %v", err)
	}
	fake.mu.Lock()
	fake.bootErr = nil
	n := fake.bootstrapped
	fake.mu.Unlock()
	h.pass()
	if fake.bootstrapped != n+1 {
		t.Fatalf("registration not retried: %d, was %d", fake.bootstrapped, n)
	}
}

// TestBootstrapWaitsForKubeconfig: before the cluster's admin kubeconfig
// exists (a distribution's is published once the control plane is
// ready), the pass does not fail; the data plane names why its Nodes are
// not read.
func TestBootstrapWaitsForKubeconfig(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	fake := &fakeClusterAPI{nodes: map[string]kubeplan.NodeState{}, bootErr: fmt.Errorf("admin kubeconfig k1-kubeconfig: %w", store.ErrNotFound)}
	h.c.cfg.Clusters.API = fake
	h.machine("cp-1")
	h.machine("dp-1")
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{Machines: []string{"cp-1"}}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{Machines: []string{"dp-1"}}
	h.create(kc)
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	for range 10 {
		h.pass() // fails the test on a pass's error
	}
	c := api.FindClusterCondition(h.cluster("k1").Status.Conditions, api.CondDataPlaneReady)
	if c == nil || c.Status != api.ConditionFalse || !strings.Contains(c.Message, "dp-1: Nodes not read: admin kubeconfig k1-kubeconfig") {
		t.Fatalf("DataPlaneReady %+v", c)
	}
}

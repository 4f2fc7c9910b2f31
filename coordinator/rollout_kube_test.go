package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// fakeNodes is the memory fake of ClusterNodes: Nodes with pods; an
// evicted pod terminates, then is gone at the next read; refuse says
// how many more evictions of a pod the PodDisruptionBudget refuses.
type fakeNodes struct {
	// now is the kubelets' clock: each Node's heartbeat is its last read
	// (a kubelet that reports all the time).
	now    func() time.Time
	mu     sync.Mutex
	nodes  map[string]*fakeNode
	refuse map[string]int
	log    []string
}

type fakeNode struct {
	ready, cordoned bool
	pods            map[string]bool // pod -> terminating
}

func (f *fakeNodes) Observe(_ context.Context, _ string, workers, drain []string) (map[string]rollout.KubeNode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]rollout.KubeNode{}
	for _, w := range workers {
		n := f.nodes[w]
		if n == nil {
			out[w] = rollout.KubeNode{}
			continue
		}
		k := rollout.KubeNode{Registered: true, Ready: n.ready, Unschedulable: n.cordoned, Heartbeat: f.now()}
		if slices.Contains(drain, w) {
			for _, p := range slices.Sorted(mapKeys(n.pods)) {
				if n.pods[p] {
					delete(n.pods, p) // terminated
					continue
				}
				k.Pods, k.Evict = append(k.Pods, p), append(k.Evict, p)
			}
		}
		out[w] = k
	}
	return out, nil
}

func (f *fakeNodes) Cordon(_ context.Context, _ store.Fence, _, node string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[node].cordoned = on
	f.log = append(f.log, fmt.Sprintf("cordon %s %v", node, on))
	return nil
}

func (f *fakeNodes) Evict(_ context.Context, _ store.Fence, _ string, pods []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	refused := ""
	for _, p := range pods {
		if f.refuse[p] > 0 {
			f.refuse[p]--
			refused = p + ": Cannot evict pod as it would violate the pod's disruption budget."
			f.log = append(f.log, "refused "+p)
			continue
		}
		for _, n := range f.nodes {
			if _, ok := n.pods[p]; ok {
				n.pods[p] = true
			}
		}
		f.log = append(f.log, "evict "+p)
	}
	return refused, nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// newDrainHarness is a cluster k1 over cps control-plane machines (cp-1
// ...) and workers, Ready and in sync, whose kubelets have Nodes (in
// nodes, a fake of the cluster's API: each control-plane machine's when
// there are no workers, else each worker's), each Node running one pod
// named podPrefix+machine; nodes' log starts empty.
func newDrainHarness(t *testing.T, cps int, workers []string, podPrefix string) (*kcHarness, *fakeNodes) {
	t.Helper()
	h := newKCHarness(t)
	api1 := &fakeClusterAPI{nodes: map[string]kubeplan.NodeState{}}
	h.c.cfg.Clusters.API = api1
	nodes := &fakeNodes{nodes: map[string]*fakeNode{}, refuse: map[string]int{}, now: func() time.Time { return h.now }}
	h.c.cfg.Clusters.Nodes = nodes
	kubelets := workers
	for i := 1; i <= cps; i++ {
		m := fmt.Sprintf("cp-%d", i)
		h.machine(m, "role", "cp")
		if len(workers) == 0 {
			kubelets = append(kubelets, m)
		}
	}
	for _, m := range workers {
		h.machine(m, "role", "dp")
		api1.nodes[m] = kubeplan.NodeState{Ready: true, Status: "True"}
	}
	for _, m := range kubelets {
		nodes.nodes[m] = &fakeNode{ready: true, pods: map[string]bool{}}
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", cps, len(workers)))
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	for _, m := range kubelets {
		nodes.nodes[m].pods[podPrefix+m] = false
	}
	nodes.log = nil
	return h, nodes
}

// TestWorkersDrainedBeforeTheirSwitch: a gitRepo change of a cluster with
// three workers rolls them one at a time, each cordoned and drained
// through the eviction API before its configuration changes (an eviction
// the PodDisruptionBudget refuses is asked again until it passes), done
// only once its Node is Ready, and uncordoned; a Node its operator
// cordoned stays cordoned.
func TestWorkersDrainedBeforeTheirSwitch(t *testing.T) {
	t.Parallel()
	h, nodes := newDrainHarness(t, 1, []string{"dp-1", "dp-2", "dp-3"}, "default/web-")
	nodes.mu.Lock()
	nodes.nodes["dp-3"].cordoned = true // by its operator
	nodes.refuse["default/web-dp-2"] = 2
	nodes.mu.Unlock()
	var errs []string
	h.onApply = func(cfg *api.NixosConfiguration) {
		nodes.mu.Lock()
		defer nodes.mu.Unlock()
		n := nodes.nodes[cfg.Metadata.Name]
		if n == nil {
			return
		}
		if !n.cordoned || len(n.pods) > 0 {
			errs = append(errs, fmt.Sprintf("%s switches with cordoned=%v pods=%v", cfg.Metadata.Name, n.cordoned, n.pods))
		}
		for m, o := range nodes.nodes {
			if m != cfg.Metadata.Name && o.cordoned && m != "dp-3" {
				errs = append(errs, fmt.Sprintf("%s switches while %s is cordoned", cfg.Metadata.Name, m))
			}
		}
		nodes.log = append(nodes.log, "switch "+cfg.Metadata.Name)
	}
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = "https://git.example/other" })
	for range 40 {
		h.pass()
		if c := h.config("dp-3"); c != nil && c.Spec.GitRepo == "https://git.example/other" && c.Status.AppliedGeneration == c.Spec.Generation &&
			!slices.ContainsFunc(h.rollouts(), func(r *api.Rollout) bool { return !r.Status.Phase.Finished() }) {
			break
		}
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	got := strings.Join(nodes.log, "\n")
	want := strings.Join([]string{
		"cordon dp-1 true", "evict default/web-dp-1", "switch dp-1", "cordon dp-1 false",
		"cordon dp-2 true", "refused default/web-dp-2", "refused default/web-dp-2", "evict default/web-dp-2", "switch dp-2", "cordon dp-2 false",
		"evict default/web-dp-3", "switch dp-3",
	}, "\n")
	if got != want {
		t.Errorf("the workers rolled as\n%s\nwant\n%s", got, want)
	}
	if len(errs) > 0 {
		t.Error(strings.Join(errs, "\n"))
	}
	if !nodes.nodes["dp-3"].cordoned || nodes.nodes["dp-1"].cordoned || nodes.nodes["dp-2"].cordoned {
		t.Errorf("cordons after: dp-1 %v dp-2 %v dp-3 %v, want only dp-3's (its operator's)", nodes.nodes["dp-1"].cordoned, nodes.nodes["dp-2"].cordoned, nodes.nodes["dp-3"].cordoned)
	}

	// dp-3 leaves the cluster: the others roll (their cluster.nix lists
	// the machines) one at a time, then dp-3 is drained before its
	// release, whose switch is not awaited for a Ready Node.
	nodes.nodes["dp-3"].cordoned = false
	nodes.nodes["dp-3"].pods["default/db-dp-3"] = false
	nodes.log = nil
	nodes.mu.Unlock()
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Count = 2 })
	for i := 0; i < 40 && h.claims()["dp-3"] != ""; i++ {
		h.pass()
	}
	nodes.mu.Lock()
	if got, want := strings.Join(nodes.log, "\n"), strings.Join([]string{"cordon dp-1 true", "switch dp-1", "cordon dp-1 false",
		"cordon dp-2 true", "switch dp-2", "cordon dp-2 false", "cordon dp-3 true", "evict default/db-dp-3", "switch dp-3"}, "\n"); got != want {
		t.Errorf("dp-3 left as\n%s\nwant\n%s", got, want)
	}
	if c := h.claims()["dp-3"]; c != "" {
		t.Errorf("dp-3 still claimed by %s", c)
	}
}

// TestControlPlaneKubeletsDrainedBeforeTheirSwitch: control-plane
// machines whose kubelets registered a Node roll one at a time as
// Kubernetes nodes: each cordoned and drained before its configuration
// changes, and uncordoned once its Node and API server are Ready again.
func TestControlPlaneKubeletsDrainedBeforeTheirSwitch(t *testing.T) {
	t.Parallel()
	cps := []string{"cp-1", "cp-2", "cp-3"}
	h, nodes := newDrainHarness(t, len(cps), nil, "kube-system/agent-")
	var errs []string
	h.onApply = func(cfg *api.NixosConfiguration) {
		nodes.mu.Lock()
		defer nodes.mu.Unlock()
		n := nodes.nodes[cfg.Metadata.Name]
		if !n.cordoned || len(n.pods) > 0 {
			errs = append(errs, fmt.Sprintf("%s switches with cordoned=%v pods=%v", cfg.Metadata.Name, n.cordoned, n.pods))
		}
		for m, o := range nodes.nodes {
			if m != cfg.Metadata.Name && o.cordoned {
				errs = append(errs, fmt.Sprintf("%s switches while %s is cordoned", cfg.Metadata.Name, m))
			}
		}
		nodes.log = append(nodes.log, "switch "+cfg.Metadata.Name)
	}
	h.update(func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = "https://git.example/other" })
	for range 60 {
		h.pass()
		if !slices.ContainsFunc(h.rollouts(), func(r *api.Rollout) bool { return !r.Status.Phase.Finished() }) &&
			!slices.ContainsFunc(cps, func(m string) bool { return h.config(m).Spec.GitRepo != "https://git.example/other" }) {
			break
		}
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	var order []string
	for _, l := range nodes.log {
		if m, ok := strings.CutPrefix(l, "switch "); ok {
			order = append(order, m)
		}
	}
	var want []string
	for _, m := range order {
		want = append(want, "cordon "+m+" true", "evict kube-system/agent-"+m, "switch "+m, "cordon "+m+" false")
	}
	if got := strings.Join(nodes.log, "\n"); len(order) != 3 || got != strings.Join(want, "\n") {
		t.Errorf("the control plane rolled as\n%s\nwant each of cp-1..3 cordoned, drained, switched and uncordoned in turn", got)
	}
	if len(errs) > 0 {
		t.Error(strings.Join(errs, "\n"))
	}
	for _, m := range cps {
		if nodes.nodes[m].cordoned {
			t.Errorf("%s left cordoned", m)
		}
	}
}

// TestAPIServerNotReadyHaltsTheRollout: a gitRepo change rolls the
// control-plane machines one at a time, each done only once its agent
// reports its API server ready after the switch; a generation that
// leaves cp-2's API server not ready halts the rollout at the step
// timeout, naming cp-2 and the probe's answer, and cp-3 is not rolled.
func TestAPIServerNotReadyHaltsTheRollout(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	for _, m := range []string{"cp-1", "cp-2", "cp-3"} {
		h.machine(m, "role", "cp")
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 3, 0))
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	const repo = "https://git.example/broken"
	h.onApply = func(cfg *api.NixosConfiguration) {
		if cfg.Metadata.Name == "cp-2" && cfg.Spec.GitRepo == repo {
			h.unhealthy["cp-2/"+api.ComponentAPIServer] = true
		}
	}
	h.update(func(kc *api.KubernetesCluster) {
		kc.Spec.GitRepo = repo
		kc.Spec.Rollout.StepTimeout = api.Duration(30 * time.Second)
	})
	var last *api.Rollout
	for range 60 {
		h.pass()
		rs := h.rollouts()
		if last = rs[len(rs)-1]; last.Status.Phase == api.RolloutHalted {
			break
		}
	}
	if last.Status.Phase != api.RolloutHalted || last.Status.HaltedNode != "cp-2" ||
		!strings.Contains(last.Status.HaltedReason, "its API server is not ready: healthz: 500") {
		t.Fatalf("rollout %s: phase %s, halted at %q: %s", last.Metadata.Name, last.Status.Phase, last.Status.HaltedNode, last.Status.HaltedReason)
	}
	if !slices.Equal(last.Spec.Kubernetes.ControlPlane, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Fatalf("rollout's control plane %v", last.Spec.Kubernetes.ControlPlane)
	}
	if c := h.config("cp-1"); c.Spec.GitRepo != repo {
		t.Errorf("cp-1 not rolled before cp-2: %s", c.Spec.GitRepo)
	}
	if c := h.config("cp-3"); c.Spec.GitRepo == repo {
		t.Error("cp-3 rolled after cp-2's API server stayed not ready")
	}
	t.Logf("halted: %s", last.Status.HaltedReason)
}

// TestDeletedClusterReleasesWorkersUndrained: deleting a cluster whose
// workers run pods a PodDisruptionBudget never lets go releases every
// machine without cordoning or evicting (the workloads go with the
// cluster), and the deletion completes.
func TestDeletedClusterReleasesWorkersUndrained(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.c.cfg.Clusters.API = &fakeClusterAPI{nodes: map[string]kubeplan.NodeState{
		"dp-1": {Ready: true, Status: "True"}, "dp-2": {Ready: true, Status: "True"}}}
	nodes := &fakeNodes{nodes: map[string]*fakeNode{}, refuse: map[string]int{}, now: func() time.Time { return h.now }}
	h.c.cfg.Clusters.Nodes = nodes
	h.machine("cp-1", "role", "cp")
	for _, m := range []string{"dp-1", "dp-2"} {
		h.machine(m, "role", "dp")
		nodes.nodes[m] = &fakeNode{ready: true, pods: map[string]bool{}}
	}
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 1, 2))
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	nodes.mu.Lock()
	for _, m := range []string{"dp-1", "dp-2"} {
		nodes.nodes[m].pods["default/web-"+m] = false
		nodes.refuse["default/web-"+m] = 1 << 20 // never let go
	}
	nodes.log = nil
	nodes.mu.Unlock()

	kc := h.cluster("k1")
	at := h.now
	kc.Metadata.DeletionTimestamp = &at
	if err := h.st.UpdateObject(t.Context(), kc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30 && h.cluster("k1") != nil; i++ {
		h.pass()
	}
	if kc := h.cluster("k1"); kc != nil {
		t.Fatalf("k1 not deleted: %s: %s", kc.Status.Phase, kc.Status.Message)
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	if len(nodes.log) > 0 {
		t.Errorf("the deletion drained: %v", nodes.log)
	}
	if c := h.claims(); len(c) > 0 {
		t.Errorf("machines still claimed: %v", c)
	}
}

package rollout

import (
	"fmt"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// A rollout whose spec.kubernetes names workers (a KubernetesCluster's
// data-plane machines) rolls each of them as a Kubernetes node:
//
//	Pending --Drain (cordon, journal Cordoned)--> Draining
//	    --(Node cordoned, no pod left to evict)--> Start --> Applying
//	    --(applied, healthy, Node Ready)--> Uncordon (if the rollout cordoned it) --> MarkDone
//	Draining --(past the step timeout)--> Halt (uncordoned, back to Pending)
//	Draining --(undo)--> Uncordon (back to Pending)
//
// A control-plane machine whose Node the API server shows (it runs a
// kubelet) rolls the same way, one at a time in the control plane's
// order: drained before its switch, done once both its API server and
// its Node are Ready again, uncordoned. One without a Node, or whose
// cluster's API does not answer when its turn comes, is not drained: a
// rollout that repairs the API servers must not wait on them.
//
// Evictions go through the eviction API, so a PodDisruptionBudget holds
// a pod until its replacement is ready elsewhere; the executor evicts
// again on every pass until the node holds no pod to evict.

// KubeNode is a worker's Node as the cluster's API server shows it.
type KubeNode struct {
	// Registered: the Node exists (a machine without one has nothing to
	// drain, and is not done after its switch until it has one).
	Registered bool
	// Ready is the Node's Ready condition; NotReady says why not.
	Ready    bool
	NotReady string
	// Unschedulable: the Node is cordoned.
	Unschedulable bool
	// NicoCordon: the cordon is nico's (a rollout halted after its
	// switch left it): the next rollout takes it over and lifts it.
	NicoCordon bool
	// Heartbeat is when its kubelet last reported (the newer of its Node
	// Lease's renewal and the Ready condition's heartbeat; the kubelet's
	// clock). Zero: none seen.
	Heartbeat time.Time
	// Pods are the pods (namespace/name) a drain of it has to see gone,
	// those being deleted included (read only for a draining node).
	Pods []string
	// Evict are those of Pods not yet being deleted.
	Evict []string
	// Refused is the last eviction the API server refused (a
	// PodDisruptionBudget), as the executor saw it.
	Refused string
}

// APIServerReport is what a control-plane machine's agent last reported
// of its own API server's /readyz.
type APIServerReport struct {
	Ready bool
	// Message says why not.
	Message string
	// CheckedAt is when the agent probed it.
	CheckedAt time.Time
}

// apiServerUnready says why control-plane machine n, applied, does not
// count as done yet: no report of its API server since its switch began,
// or one that says it is not ready ("" when ready).
func apiServerUnready(obs Observed, n *Node, p *api.NodeProgress) string {
	if !obs.Rollout.Spec.IsAPIServer(n.Name) {
		return ""
	}
	a := n.APIServer
	if a == nil || a.CheckedAt.Before(p.StartedAt) {
		return "no report of its API server since its switch"
	}
	if !a.Ready {
		return "its API server is not ready: " + a.Message
	}
	return ""
}

// kubeWait says why the cluster's Nodes cannot be judged, or "".
func kubeWait(obs Observed) string {
	if obs.KubeError != "" {
		return "the cluster's API: " + obs.KubeError
	}
	return ""
}

// kubeletNode tells whether the rollout treats n (at progress p, nil
// before it started) as a Kubernetes node it drains and awaits Ready: a
// worker, a leaving worker, or a control-plane machine with a Node (or
// that this rollout cordoned).
func kubeletNode(obs Observed, n *Node, p *api.NodeProgress) bool {
	s := obs.Rollout.Spec
	if s.Drains(n.Name) {
		return true
	}
	if !s.IsAPIServer(n.Name) {
		return false
	}
	return (n.Kube != nil && n.Kube.Registered) || (p != nil && (p.Cordoned || p.Phase == api.NodeDraining))
}

// drainsNow tells whether the node named, about to roll, is drained
// first: a worker or a leaving worker, or an API server's machine whose
// Node is registered (it runs a kubelet).
func drainsNow(obs Observed, name string) bool {
	if n := obs.node(name); n != nil {
		return kubeletNode(obs, n, nil)
	}
	return obs.Rollout.Spec.Drains(name)
}

// joiningWorker tells whether the node named is a worker whose Node the
// cluster's API server shows no trace of (read without error): a machine
// joining the cluster, which nothing runs on yet.
func joiningWorker(obs Observed, name string) bool {
	if !obs.Rollout.Spec.IsWorker(name) || obs.KubeError != "" {
		return false
	}
	n := obs.node(name)
	return n != nil && n.Kube != nil && !n.Kube.Registered
}

// startControlPlane starts control-plane node n, or first drains it when
// it runs a kubelet (its Node is registered).
func startControlPlane(obs Observed, n *Node, why string) Step {
	if !obs.Rollout.Spec.Undo && drainsNow(obs, n.Name) {
		return planDrain(obs, []string{n.Name})
	}
	return Step{Action: Start, Nodes: []string{n.Name}, Reason: why}
}

// planDrain is planNext's step for a data-plane batch with workers: the
// batch starts draining. The rollout cordons those with a schedulable Node
// and takes over a cordon of nico's (one an earlier rollout left when it
// halted after the switch), and uncordons them after; a cordon of the
// operator's stays.
func planDrain(obs Observed, batch []string) Step {
	if why := kubeWait(obs); why != "" {
		return Step{Action: Wait, Nodes: batch, Reason: "before draining " + strings.Join(batch, ", ") + ": " + why}
	}
	s := Step{Action: Drain, Nodes: batch, Reason: "cordon and drain " + strings.Join(batch, ", ") + " before the switch"}
	for _, name := range batch {
		if n := obs.node(name); n != nil && n.Kube != nil && n.Kube.Registered && (!n.Kube.Unschedulable || n.Kube.NicoCordon) {
			s.Cordon = append(s.Cordon, name)
		}
	}
	return s
}

// planDraining judges the nodes being drained: on to Start once every
// one is drained, Drain again while one is not, Halt when one is past the
// step timeout, Uncordon when undo was asked.
func planDraining(obs Observed, now time.Time) (Step, bool) {
	r := obs.Rollout
	var names []string
	for _, p := range r.Status.Nodes {
		if p.Phase == api.NodeDraining {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return Step{}, false
	}
	if r.Spec.Undo {
		return Step{Action: Uncordon, Nodes: names, Reason: "undo: the drain of " + strings.Join(names, ", ") + " stops, uncordoned"}, true
	}
	timeout := stepTimeout(r)
	var waiting []string
	for _, name := range names {
		p := r.Node(name)
		n := obs.node(name)
		if n == nil {
			return Step{Action: Halt, Nodes: haltFirst(names, name), Reason: fmt.Sprintf("node %s is no longer registered", name)}, true
		}
		why := undrained(obs, n, p)
		if why == "" {
			continue
		}
		waiting = append(waiting, name+": "+why)
		if now.Sub(p.DrainStartedAt) >= timeout {
			return Step{Action: Halt, Nodes: haltFirst(names, name),
				Reason: fmt.Sprintf("the drain of %s did not finish within %s (%s); not switching it, uncordoned", name, timeout, why)}, true
		}
	}
	if len(waiting) > 0 {
		return Step{Action: Drain, Nodes: names, Reason: "draining " + strings.Join(waiting, "; ")}, true
	}
	if obs.ActiveOp != "" {
		return Step{Action: Wait, Reason: "drained; operation " + obs.ActiveOp + " is in flight"}, true
	}
	// A control-plane node (an etcd member) is drained alone; it switches
	// under the control plane's rules: etcd healthy, and never while it leads etcd
	// (leadership may have moved to it during the drain).
	if n := obs.node(names[0]); n != nil && n.ControlPlane && len(names) == 1 {
		if !obs.ClusterHealthy {
			return Step{Action: Wait, Reason: "drained " + n.Name + "; etcd cluster is not healthy: " + obs.ClusterReason}, true
		}
		if n.Leader {
			if s, ok := leadershipOff(obs, n); ok {
				return s, true
			}
		}
	}
	return Step{Action: Start, Nodes: names, Reason: "drained " + strings.Join(names, ", ") + ": switching"}, true
}

// leadershipOff moves etcd's leadership off drained control-plane machine
// n before its switch: to an updated healthy voter when there is one,
// else to any other healthy voter (n has not switched yet, so the leader
// is still rolled last among the updated). None: n rolls in place.
func leadershipOff(obs Observed, n *Node) (Step, bool) {
	var to *Node
	for _, p := range obs.Rollout.Status.Nodes {
		o := obs.node(p.Name)
		if !p.ControlPlane || p.Name == n.Name || o == nil || !o.Voter || !o.Healthy || !o.Alive {
			continue
		}
		if to == nil || p.Phase == api.NodeDone {
			to = o
		}
	}
	if to == nil {
		return Step{}, false
	}
	return Step{Action: TransferLeader, Nodes: []string{n.Name}, To: to.MemberID, LeaderURL: n.ClientURL,
		Reason: fmt.Sprintf("%s leads etcd: moving leadership to %s before it switches", n.Name, to.Name)}, true
}

// undrained says why node n, draining, is not drained yet, or "".
func undrained(obs Observed, n *Node, p *api.NodeProgress) string {
	if !kubeletNode(obs, n, p) {
		return ""
	}
	if why := kubeWait(obs); why != "" {
		return why
	}
	k := n.Kube
	if k == nil || !k.Registered {
		return "" // no Node: nothing runs there
	}
	if p.Cordoned && !k.Unschedulable {
		return "its Node is not cordoned yet"
	}
	if len(k.Pods) == 0 {
		return ""
	}
	why := fmt.Sprintf("%d pods left (%s)", len(k.Pods), strings.Join(k.Pods, ", "))
	if k.Refused != "" {
		why += "; eviction refused: " + k.Refused
	}
	return why
}

// kubeletUnready says why node n, applied at step p, does not count as
// done yet ("" it does): a worker's Node, or that of a control-plane
// machine that runs a kubelet, must be Ready and its kubelet must have
// reported since the switch started. A Ready condition from before the
// switch proves nothing: a generation that stops the kubelet leaves its
// Node Ready until the node controller's grace period (40 s) passes.
func kubeletUnready(obs Observed, n *Node, p *api.NodeProgress) string {
	if !obs.Rollout.Spec.IsWorker(n.Name) && (!obs.Rollout.Spec.IsAPIServer(n.Name) || !kubeletNode(obs, n, p)) {
		return ""
	}
	if why := kubeWait(obs); why != "" {
		return why
	}
	switch k := n.Kube; {
	case k == nil || !k.Registered:
		return "its Node is not registered"
	case !k.Ready:
		return "its Node is not Ready: " + k.NotReady
	case k.Heartbeat.Before(p.StartedAt):
		last := "none"
		if !k.Heartbeat.IsZero() {
			last = k.Heartbeat.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("its kubelet has not reported since the switch (last heartbeat %s)", last)
	}
	return ""
}

// needsUncordon tells whether worker or control-plane machine n, done,
// still has the cordon the rollout put on its Node (a leaving worker's
// stays: its Node goes).
func needsUncordon(r *api.Rollout, n *Node, p *api.NodeProgress) bool {
	return (r.Spec.IsWorker(n.Name) || r.Spec.IsAPIServer(n.Name)) && p.Cordoned && n.Kube != nil && n.Kube.Unschedulable
}

// haltFirst is names with first moved to the front (Halt names it).
func haltFirst(names []string, first string) []string {
	out := []string{first}
	for _, n := range names {
		if n != first {
			out = append(out, n)
		}
	}
	return out
}

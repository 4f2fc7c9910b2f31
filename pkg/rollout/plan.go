// Package rollout plans how a NixOS generation rolls across the fleet. Plan
// is pure: it reads the journaled rollout and what was observed, and returns
// the next step; the coordinator's executor applies it.
//
// Default order: the data plane first, MaxUnavailable nodes at a time; then
// the control plane one node at a time, followers first and the etcd leader
// last, after leadership moved to a voter that already runs the new
// generation and is healthy. ControlPlaneFirst swaps the two parts (the
// Kubernetes version skew policy forbids kubelets newer than the API server).
//
//	           +--> Start(batch) --> Wait, Extend ... --(all applied, healthy)--> MarkDone --+
//	Init --> --+                           \--(failed, timed out)--> Halt             |
//	           +<-----------------------------------------------------------------+
//	           (no node left) --> Finish            (only the etcd leader left) --> TransferLeader
package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// DefaultStepTimeout bounds one step when the rollout sets none.
const DefaultStepTimeout = 10 * time.Minute

// Node is one registered node as the coordinator observed it.
type Node struct {
	Name         string
	ControlPlane bool
	// Alive: its heartbeat lease is live.
	Alive bool
	// DeadSince is when the leader's liveness record saw the node die
	// (zero: it is not dead).
	DeadSince time.Time
	// Config is its desired configuration and the agent's status (nil: none).
	Config *api.NixosConfiguration
	// Voter, Healthy, Leader describe its etcd member (control plane).
	Voter, Healthy, Leader bool
	MemberID               api.MemberID
	ClientURL              string
	// Kube is its Node, for a Kubernetes worker of the rollout (nil: no
	// Node was read).
	Kube *KubeNode
	// APIServer is its agent's last report of its own API server, for a
	// Kubernetes control-plane machine of the rollout (nil: none).
	APIServer *APIServerReport
}

// Observed is the planner's input.
type Observed struct {
	Rollout *api.Rollout
	Nodes   []Node
	// ClusterHealthy: etcd has a leader and every voter is healthy.
	ClusterHealthy bool
	ClusterReason  string
	// ActiveOp is the operation holding the one-change-in-flight slot ("" none).
	ActiveOp string
	// KubeError, for a rollout of a KubernetesCluster's machines, says why
	// their Nodes could not be read ("" they were).
	KubeError string
	// SlotWanted names a change that waits for the one-change slot ("":
	// none). A rollout then starts nothing more: the step in flight ends
	// when its nodes do and releases the slot, and the next waits.
	SlotWanted string
	// ReplaceDeadAfter is the etcd cluster's replaceDeadMembersAfter (0:
	// never). A node dead this long is replaced (its member removed, its
	// VM made anew), so the rollout does not wait for it.
	ReplaceDeadAfter time.Duration
}

// Action is what the executor does.
type Action string

// Actions.
const (
	None           Action = "None"
	Wait           Action = "Wait"
	Init           Action = "Init"           // journal the node list in rolling order
	SetPhase       Action = "SetPhase"       // Paused, Running, Undoing
	Start          Action = "Start"          // give Nodes the new (or, undoing, the previous) configuration
	Extend         Action = "Extend"         // Start Nodes too, within the data-plane step in flight
	MarkDone       Action = "MarkDone"       // Nodes applied and are healthy
	Halt           Action = "Halt"           // Nodes[0] failed: stop the rollout
	TransferLeader Action = "TransferLeader" // move etcd leadership to To before the leader rolls
	CloseOp        Action = "CloseOp"        // release a step's slot left behind
	Drain          Action = "Drain"          // cordon Nodes' Kubernetes Nodes (Cordon) and evict their pods
	Uncordon       Action = "Uncordon"       // uncordon Nodes' Kubernetes Nodes (the rollout cordoned them)
	Finish         Action = "Finish"
)

// Step is the planner's decision.
type Step struct {
	Action Action
	Nodes  []string
	Phase  api.RolloutPhase
	Order  []api.NodeProgress
	// To and LeaderURL: TransferLeader from the leader at LeaderURL to member To.
	To        api.MemberID
	LeaderURL string
	// Cordon are the nodes of a Drain whose Node the rollout cordons.
	Cordon []string
	// Extend are the nodes a MarkDone starts in the places its nodes
	// leave, within the data-plane step in flight: one write records the
	// finished nodes and starts the next ones.
	Extend []string
	Reason string
}

// Starts are the nodes step s gives the rollout's configuration: a Start's
// or an Extend's nodes, a MarkDone's Extend.
func (s Step) Starts() []string {
	switch s.Action {
	case Start, Extend:
		return s.Nodes
	case MarkDone:
		return s.Extend
	}
	return nil
}

// String is a compact form for logs and goldens.
func (s Step) String() string {
	out := string(s.Action)
	if len(s.Nodes) > 0 {
		out += fmt.Sprintf(" %v", s.Nodes)
	}
	if s.Phase != "" {
		out += " phase=" + string(s.Phase)
	}
	if s.Action == TransferLeader {
		out += " to=" + s.To.String()
	}
	if len(s.Cordon) > 0 {
		out += fmt.Sprintf(" cordon=%v", s.Cordon)
	}
	if len(s.Extend) > 0 {
		out += fmt.Sprintf(" extend=%v", s.Extend)
	}
	if len(s.Order) > 0 {
		var names []string
		for _, p := range s.Order {
			names = append(names, p.Name)
		}
		out += fmt.Sprintf(" order=%v", names)
	}
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}

// Plan returns the next step of obs.Rollout.
func Plan(obs Observed, now time.Time) Step {
	r := obs.Rollout
	if r == nil || r.Status.Phase.Finished() {
		return Step{Action: None}
	}
	undo := r.Spec.Undo
	if r.Status.Phase == api.RolloutHalted && !undo {
		return Step{Action: None, Reason: "halted: " + r.Status.HaltedReason}
	}
	if len(r.Status.Nodes) == 0 {
		return planInit(obs)
	}
	if undo && r.Status.Phase != api.RolloutUndoing {
		return Step{Action: SetPhase, Phase: api.RolloutUndoing, Reason: "undo requested"}
	}
	if s, ok := planDraining(obs, now); ok {
		return s
	}
	if s, ok := planInFlight(obs, now); ok {
		return s
	}
	if obs.ActiveOp != "" && obs.ActiveOp == r.Status.Operation {
		return Step{Action: CloseOp, Reason: "step " + obs.ActiveOp + " has no node in flight"}
	}
	if !undo {
		if r.Spec.Paused && r.Status.Phase != api.RolloutPaused {
			return Step{Action: SetPhase, Phase: api.RolloutPaused, Reason: "paused"}
		}
		if r.Spec.Paused {
			return Step{Action: None, Reason: "paused"}
		}
		if r.Status.Phase != api.RolloutRunning {
			return Step{Action: SetPhase, Phase: api.RolloutRunning, Reason: "running"}
		}
	} else if r.Spec.Paused {
		return Step{Action: None, Reason: "undo paused"}
	}
	cands := candidates(r)
	if len(cands) == 0 {
		done, total := r.Counts()
		return Step{Action: Finish, Reason: fmt.Sprintf("%d of %d nodes done", done, total)}
	}
	if obs.ActiveOp != "" {
		return Step{Action: Wait, Reason: "operation " + obs.ActiveOp + " is in flight"}
	}
	return planNext(obs, cands, now)
}

// planInit orders the nodes: data plane then control plane (or the
// reverse), each by name. A rollout of every node (no spec.nodes) leaves
// out the machines whose configuration a KubernetesCluster owns, unless
// it is that cluster's.
func planInit(obs Observed) Step {
	r := obs.Rollout
	var dp, cp []api.NodeProgress
	known := map[string]bool{}
	for _, n := range obs.Nodes {
		known[n.Name] = true
		if len(r.Spec.Nodes) > 0 && !slices.Contains(r.Spec.Nodes, n.Name) {
			continue
		}
		if len(r.Spec.Nodes) == 0 && heldByOther(r, n.Config) {
			continue // a cluster's machine rolls with its cluster's rollouts only
		}
		p := api.NodeProgress{Name: n.Name, ControlPlane: n.ControlPlane}
		if n.ControlPlane {
			cp = append(cp, p)
		} else {
			dp = append(dp, p)
		}
	}
	for _, name := range r.Spec.Nodes {
		if !known[name] {
			return Step{Action: Halt, Nodes: []string{name}, Reason: fmt.Sprintf("node %s is not registered", name)}
		}
	}
	if _, err := r.Spec.BatchSize(len(dp)); err != nil {
		return Step{Action: Halt, Reason: err.Error()}
	}
	if len(dp)+len(cp) == 0 {
		return Step{Action: Halt, Reason: "no node to roll"}
	}
	byName := func(a, b api.NodeProgress) int { return natural(a.Name, b.Name) }
	slices.SortFunc(dp, byName)
	slices.SortFunc(cp, byName)
	order := append(dp, cp...)
	if r.Spec.ControlPlaneFirst {
		order = append(cp, dp...)
	}
	return Step{Action: Init, Order: order, Reason: fmt.Sprintf("%d data-plane, %d control-plane nodes", len(dp), len(cp))}
}

// planInFlight judges the nodes of the step in flight.
func planInFlight(obs Observed, now time.Time) (Step, bool) {
	r := obs.Rollout
	timeout := stepTimeout(r)
	var done, uncordon []string
	var waiting string
	inflight := false
	for _, p := range r.Status.Nodes {
		if p.Phase != api.NodeApplying && p.Phase != api.NodeReverting {
			continue
		}
		inflight = true
		n := obs.node(p.Name)
		if n == nil {
			return Step{Action: Halt, Nodes: []string{p.Name}, Reason: fmt.Sprintf("node %s is no longer registered", p.Name)}, true
		}
		if why := replaced(obs, n, now); why != "" {
			// Waiting out the step timeout would hold the change slot
			// the dead member's removal needs.
			return Step{Action: Halt, Nodes: []string{p.Name}, Reason: why}, true
		}
		c := n.Config
		if c == nil || c.Spec.Generation != p.Generation {
			return Step{Action: Halt, Nodes: []string{p.Name}, Reason: fmt.Sprintf("configuration of %s changed outside the rollout", p.Name)}, true
		}
		switch c.Settled() {
		case api.GenerationFailed:
			return Step{Action: Halt, Nodes: []string{p.Name}, Reason: fmt.Sprintf("generation %d failed on %s: %s", p.Generation, p.Name, c.Status.LastError)}, true
		case api.GenerationApplied:
			why := unready(obs, n)
			if why == "" {
				why = kubeletUnready(obs, n, &p)
			}
			if why == "" {
				why = apiServerUnready(obs, n, &p)
			}
			if why == "" {
				if needsUncordon(r, n, &p) {
					uncordon = append(uncordon, p.Name)
				} else {
					done = append(done, p.Name)
				}
				continue
			} else {
				waiting = fmt.Sprintf("%s applied generation %d; waiting: %s", p.Name, p.Generation, why)
			}
		default:
			waiting = fmt.Sprintf("waiting for %s to apply generation %d", p.Name, p.Generation)
		}
		if elapsed := now.Sub(p.StartedAt); elapsed >= timeout {
			return Step{Action: Halt, Nodes: []string{p.Name}, Reason: fmt.Sprintf("%s did not report generation %d applied and healthy within %s (%s)", p.Name, p.Generation, timeout, waiting)}, true
		}
	}
	if !inflight {
		return Step{}, false
	}
	if len(uncordon) > 0 {
		return Step{Action: Uncordon, Nodes: uncordon, Reason: "Node Ready after the switch: uncordon " + strings.Join(uncordon, ", ")}, true
	}
	if len(done) > 0 {
		s := Step{Action: MarkDone, Nodes: done}
		if ext, ok := extendAfterDone(obs, done); ok {
			s.Extend, s.Reason = ext.Nodes, ext.Reason
		}
		return s, true
	}
	if s, ok := planExtend(obs); ok {
		return s, true
	}
	return Step{Action: Wait, Reason: waiting}, true
}

// extendAfterDone is the Extend that follows marking the done nodes done,
// planned on the rollout as that MarkDone leaves it, so that the places
// they free are taken in the same write. None when no node of the step is
// left in flight: the MarkDone then ends the step and releases its slot.
func extendAfterDone(obs Observed, done []string) (Step, bool) {
	r := *obs.Rollout
	r.Status.Nodes = slices.Clone(r.Status.Nodes)
	left := false
	for i := range r.Status.Nodes {
		p := &r.Status.Nodes[i]
		switch {
		case slices.Contains(done, p.Name):
			p.Phase = api.NodeDone
		case p.Phase == api.NodeApplying || p.Phase == api.NodeReverting:
			left = true
		}
	}
	if !left {
		return Step{}, false
	}
	obs.Rollout = &r
	return planExtend(obs)
}

// planExtend keeps a data-plane step MaxUnavailable nodes wide: as its
// nodes finish, the next ones in order start within the same step, so the
// slowest node of a batch never holds back the next. It starts none while
// the step holds a control-plane node or an API server's machine, while
// the rollout is paused or undone, or while another change waits for the
// slot (SlotWanted): the step then ends when its nodes do. It stops at the
// first node that could not join a batch as it is (a control-plane node,
// an API server's machine, a node down or to drain): planNext takes that
// one when the step has ended.
func planExtend(obs Observed) (Step, bool) {
	r := obs.Rollout
	if r.Spec.Paused || r.Spec.Undo || r.Status.Phase != api.RolloutRunning || obs.SlotWanted != "" ||
		r.Status.Operation == "" || obs.ActiveOp != r.Status.Operation {
		return Step{}, false
	}
	total, counted := 0, 0
	for _, p := range r.Status.Nodes {
		if !p.ControlPlane {
			total++
		}
		if p.Phase != api.NodeApplying {
			continue
		}
		if p.ControlPlane || r.Spec.IsAPIServer(p.Name) {
			return Step{}, false
		}
		if !joiningWorker(obs, p.Name) {
			counted++
		}
	}
	k, err := r.Spec.BatchSize(total)
	if err != nil {
		return Step{}, false
	}
	var more []string
	for _, p := range candidates(r) {
		if p.ControlPlane || r.Spec.IsAPIServer(p.Name) || drainsNow(obs, p.Name) {
			break
		}
		if n := obs.node(p.Name); n == nil || !n.Alive {
			break
		}
		free := joiningWorker(obs, p.Name)
		if !free && counted >= k {
			break
		}
		more = append(more, p.Name)
		if !free {
			counted++
		}
	}
	if len(more) == 0 {
		return Step{}, false
	}
	return Step{Action: Extend, Nodes: more, Reason: fmt.Sprintf("data plane, %d at a time: %d more as others finished", k, len(more))}, true
}

// unready says why an applied node does not count as done yet, or "".
func unready(obs Observed, n *Node) string {
	if !n.Alive {
		return "no heartbeat"
	}
	if n.ControlPlane {
		if !n.Voter || !n.Healthy {
			return "its etcd member is not a healthy voter"
		}
		if !obs.ClusterHealthy {
			return "etcd cluster is not healthy: " + obs.ClusterReason
		}
	}
	return ""
}

// candidates are the nodes still to roll in the current direction, in order.
func candidates(r *api.Rollout) []api.NodeProgress {
	var out []api.NodeProgress
	for _, p := range r.Status.Nodes {
		if r.Spec.Undo {
			if p.Phase == api.NodeDone || p.Phase == api.NodeRollFailed {
				out = append(out, p)
			}
		} else if p.Phase == api.NodePending {
			out = append(out, p)
		}
	}
	return out
}

// planNext starts the next batch: data-plane nodes MaxUnavailable at a
// time, control-plane nodes one at a time with the etcd leader last.
func planNext(obs Observed, cands []api.NodeProgress, now time.Time) Step {
	r := obs.Rollout
	if obs.SlotWanted != "" {
		return Step{Action: Wait, Reason: obs.SlotWanted + " waits for the one-change slot"}
	}
	for _, p := range cands {
		if r.Spec.Undo && p.Previous == nil {
			return Step{Action: MarkDone, Nodes: []string{p.Name}, Reason: p.Name + " had no configuration before the rollout; left as it is"}
		}
	}
	first := cands[0].ControlPlane
	if !first {
		var dp []string
		total := 0
		for _, p := range r.Status.Nodes {
			if !p.ControlPlane {
				total++
			}
		}
		k, _ := r.Spec.BatchSize(total)
		// A Kubernetes API server's machine that is no etcd member rolls
		// here, but alone: the API servers go one at a time. A worker
		// whose Node is not registered yet (a machine joining) runs no
		// pod and serves nothing: it joins the batch without counting
		// against maxUnavailable.
		api1, counted := false, 0
		for _, p := range cands {
			if p.ControlPlane {
				continue
			}
			is := r.Spec.IsAPIServer(p.Name)
			if len(dp) > 0 && (is || api1) {
				continue
			}
			free := joiningWorker(obs, p.Name)
			if !free && counted == k {
				continue
			}
			if len(dp) == 0 {
				api1 = is
			}
			dp = append(dp, p.Name)
			if !free {
				counted++
			}
		}
		for _, name := range dp {
			if n := obs.node(name); n == nil || !n.Alive {
				return downStep(obs, name, now)
			}
		}
		if !r.Spec.Undo && slices.ContainsFunc(dp, func(name string) bool { return drainsNow(obs, name) }) {
			return planDrain(obs, dp)
		}
		return Step{Action: Start, Nodes: dp, Reason: fmt.Sprintf("data plane, %d at a time", k)}
	}
	if !obs.ClusterHealthy {
		return Step{Action: Wait, Reason: "etcd cluster is not healthy: " + obs.ClusterReason}
	}
	var leader *Node
	for _, p := range cands {
		if !p.ControlPlane {
			continue
		}
		n := obs.node(p.Name)
		if n == nil || !n.Alive {
			return downStep(obs, p.Name, now)
		}
		if n.Leader {
			leader = n
			continue
		}
		return startControlPlane(obs, n, "control plane, one at a time, followers first")
	}
	return leaderStep(obs, leader)
}

// leaderStep is the step for the etcd leader when it is the control-plane
// node to roll: hand leadership to an updated healthy voter first.
func leaderStep(obs Observed, leader *Node) Step {
	r := obs.Rollout
	var to *Node
	for _, p := range r.Status.Nodes {
		if !p.ControlPlane || p.Name == leader.Name {
			continue
		}
		updated := p.Phase == api.NodeDone
		if r.Spec.Undo {
			updated = p.Phase == api.NodeReverted || p.Phase == api.NodePending
		}
		if n := obs.node(p.Name); updated && n != nil && n.Voter && n.Healthy && n.Alive {
			to = n
			break
		}
	}
	if to == nil {
		if otherVoters(obs, leader.Name) {
			return Step{Action: Halt, Nodes: []string{leader.Name}, Reason: fmt.Sprintf("%s leads etcd and no updated healthy voter can take leadership", leader.Name)}
		}
		return startControlPlane(obs, leader, "the only voter rolls in place")
	}
	return Step{Action: TransferLeader, Nodes: []string{leader.Name}, To: to.MemberID, LeaderURL: leader.ClientURL,
		Reason: fmt.Sprintf("%s leads etcd: moving leadership to %s before it rolls", leader.Name, to.Name)}
}

// downStep is the step for a node to roll next whose heartbeat is gone or
// that is no longer registered: it is never rolled onto. A node dead past
// ReplaceDeadAfter, or gone from the fleet, halts the rollout at once:
// it is being replaced or was removed, and will not come back as it was.
// Otherwise the rollout waits for it (a heartbeat lease lost in a
// partition comes back a moment after the node's member serves again) up
// to the step timeout, counted from when the node could have started
// (the rollout's start or the last node's finish), then halts.
func downStep(obs Observed, name string, now time.Time) Step {
	r := obs.Rollout
	n := obs.node(name)
	if n == nil {
		return Step{Action: Halt, Nodes: []string{name}, Reason: fmt.Sprintf("node %s is no longer registered", name)}
	}
	if why := replaced(obs, n, now); why != "" {
		return Step{Action: Halt, Nodes: []string{name}, Reason: why}
	}
	since := r.Status.StartedAt
	for _, p := range r.Status.Nodes {
		if p.FinishedAt.After(since) {
			since = p.FinishedAt
		}
	}
	timeout := stepTimeout(r)
	if waited := now.Sub(since); waited >= timeout {
		return Step{Action: Halt, Nodes: []string{name}, Reason: fmt.Sprintf("%s is down (no heartbeat) for the step timeout (%s); not rolling onto it", name, timeout)}
	}
	return Step{Action: Wait, Nodes: []string{name}, Reason: fmt.Sprintf("%s is down (no heartbeat); waiting for it up to %s, then halting", name, timeout)}
}

// replaced says why n is not waited for: dead past the cluster's
// replaceDeadMembersAfter, it is being replaced. "" when it is not.
func replaced(obs Observed, n *Node, now time.Time) string {
	if obs.ReplaceDeadAfter <= 0 || n.DeadSince.IsZero() {
		return ""
	}
	dead := now.Sub(n.DeadSince)
	if dead < obs.ReplaceDeadAfter {
		return ""
	}
	return fmt.Sprintf("%s is dead for %s, past replaceDeadMembersAfter (%s): it is being replaced, not waited for", n.Name, dead.Round(time.Second), obs.ReplaceDeadAfter)
}

// stepTimeout is the rollout's step timeout, or DefaultStepTimeout.
func stepTimeout(r *api.Rollout) time.Duration {
	if t := time.Duration(r.Spec.StepTimeout); t > 0 {
		return t
	}
	return DefaultStepTimeout
}

func otherVoters(obs Observed, except string) bool {
	for _, n := range obs.Nodes {
		if n.Name != except && n.Voter {
			return true
		}
	}
	return false
}

func (o Observed) node(name string) *Node {
	for i := range o.Nodes {
		if o.Nodes[i].Name == name {
			return &o.Nodes[i]
		}
	}
	return nil
}

// heldByOther tells whether cfg is owned by a KubernetesCluster that does
// not own r.
func heldByOther(r *api.Rollout, cfg *api.NixosConfiguration) bool {
	if cfg == nil {
		return false
	}
	for _, o := range cfg.Metadata.OwnerReferences {
		if o.Kind == api.KindKubernetesCluster && !slices.Contains(r.Metadata.OwnerReferences, o) {
			return true
		}
	}
	return false
}

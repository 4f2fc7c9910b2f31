package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// OpName names the journal entry of a rollout's step.
func OpName(r *api.Rollout) string {
	return fmt.Sprintf("rollout-%s-%d", r.Metadata.Name, r.Status.Step)
}

// Configure returns node p's new configuration for the step: the rollout's
// template for p (or, undoing, what the node had before) under the node's
// next generation number, owned by the rollout's owners when it has any,
// and records the generation and the previous spec in p.
func Configure(r *api.Rollout, p *api.NodeProgress, cur *api.NixosConfiguration) *api.NixosConfiguration {
	next := api.NewNixosConfiguration(p.Name)
	if cur != nil {
		c := *cur
		next = &c
	}
	gen := next.Spec.Generation + 1
	var spec api.NixosConfigurationSpec
	if r.Spec.Undo {
		if p.Previous != nil {
			spec = *p.Previous
		}
	} else {
		spec = r.Spec.Template
		if t, ok := r.Spec.Templates[p.Name]; ok {
			spec = t
		}
		if cur != nil && cur.Metadata.Name != "" && cur.Spec.GitRepo != "" {
			prev := cur.Spec
			p.Previous = &prev
		}
	}
	spec.Generation, spec.Attempt = gen, 0
	next.Spec = spec
	if len(r.Metadata.OwnerReferences) > 0 {
		next.Metadata.OwnerReferences = slices.Clone(r.Metadata.OwnerReferences)
	}
	p.Generation = gen
	return next
}

// Record writes step s into r's journal. It reports whether the step's
// slot (the active operation) is released by it.
func Record(r *api.Rollout, s Step, now time.Time, leader string) (release bool) {
	st := &r.Status
	st.UpdatedAt, st.Leader = now, leader
	if s.Reason != "" {
		st.Message = s.Reason
	}
	switch s.Action {
	case Init:
		st.Nodes = slices.Clone(s.Order)
		st.Phase = api.RolloutRunning
		if r.Spec.Paused {
			st.Phase = api.RolloutPaused
		}
		st.StartedAt = now
	case SetPhase:
		st.Phase = s.Phase
		if s.Phase == api.RolloutUndoing {
			st.HaltedNode, st.HaltedReason = "", ""
		}
	case Start:
		st.Step++
		st.Operation = OpName(r)
		st.StepSince = now
		st.Current = slices.Clone(s.Nodes)
		for _, name := range s.Nodes {
			p := r.Node(name)
			p.Phase, p.StartedAt, p.FinishedAt, p.Message = api.NodeApplying, now, time.Time{}, ""
			if r.Spec.Undo {
				p.Phase = api.NodeReverting
			}
		}
	case Extend:
		extend(r, s.Nodes, now)
	case Drain:
		for _, name := range s.Nodes {
			if p := r.Node(name); p != nil && p.Phase == api.NodePending {
				p.Phase, p.DrainStartedAt, p.Message = api.NodeDraining, now, ""
				p.Cordoned = slices.Contains(s.Cordon, name)
			}
		}
	case Uncordon:
		for _, name := range s.Nodes {
			p := r.Node(name)
			if p == nil {
				continue
			}
			p.Cordoned = false
			if p.Phase == api.NodeDraining {
				p.Phase, p.DrainStartedAt = api.NodePending, time.Time{}
			}
		}
	case MarkDone:
		for _, name := range s.Nodes {
			p := r.Node(name)
			p.Phase, p.FinishedAt = api.NodeDone, now
			if r.Spec.Undo {
				p.Phase = api.NodeReverted
			}
			st.Current = slices.DeleteFunc(st.Current, func(n string) bool { return n == name })
		}
		extend(r, s.Extend, now)
		if len(st.Current) == 0 && st.Operation != "" {
			st.Operation, release = "", true
		}
	case Halt:
		for _, name := range s.Nodes {
			if p := r.Node(name); p != nil && (p.Phase == api.NodeApplying || p.Phase == api.NodeReverting) {
				p.Phase, p.FinishedAt, p.Message = api.NodeRollFailed, now, s.Reason
			}
			// A drain that did not finish: the node never switched, and
			// the executor uncordoned it.
			if p := r.Node(name); p != nil && p.Phase == api.NodeDraining {
				p.Phase, p.DrainStartedAt, p.Cordoned, p.Message = api.NodePending, time.Time{}, false, s.Reason
			}
		}
		st.Phase = api.RolloutHalted
		if len(s.Nodes) > 0 {
			st.HaltedNode = s.Nodes[0]
		}
		st.HaltedReason = s.Reason
		// Others of the batch keep what they applied; undo reverts them.
		for _, name := range st.Current {
			if p := r.Node(name); p != nil && p.Phase == api.NodeApplying {
				p.Phase, p.FinishedAt, p.Message = api.NodeRollFailed, now, "its step was halted by "+st.HaltedNode
			}
		}
		st.Current = nil
		release = st.Operation != ""
		st.Operation = ""
	case CloseOp:
		st.Operation, st.Current, release = "", nil, true
	case Finish:
		st.Phase = api.RolloutSucceeded
		if r.Spec.Undo {
			st.Phase = api.RolloutUndone
		}
		st.FinishedAt = now
	}
	return release
}

// Journals tells whether step s changes r's journal: a Drain of nodes
// already draining does not (the executor evicts again), any other step
// that Record writes does. A Wait is journaled (Status.Message) when no
// step is in flight and it says something new: what holds the rollout
// before its next step (a change waiting for the slot, another operation,
// an unhealthy cluster, a node down) is shown once; a wait within a step
// is not, its reason moves with the step's nodes.
func Journals(r *api.Rollout, s Step) bool {
	switch s.Action {
	case None:
		return false
	case Wait:
		return s.Reason != "" && s.Reason != r.Status.Message && r.Status.Operation == "" && len(r.Status.Current) == 0
	case Drain:
		for _, name := range s.Nodes {
			if p := r.Node(name); p != nil && p.Phase == api.NodePending {
				return true
			}
		}
		return false
	}
	return true
}

// Uncordons are the nodes whose Node the executor of step s uncordons
// before Record: an Uncordon's nodes the rollout cordoned, and on a Halt
// the draining nodes it cordoned.
func Uncordons(r *api.Rollout, s Step) []string {
	var out []string
	for _, name := range s.Nodes {
		p := r.Node(name)
		if p == nil || !p.Cordoned {
			continue
		}
		if s.Action == Uncordon || (s.Action == Halt && p.Phase == api.NodeDraining) {
			out = append(out, name)
		}
	}
	return out
}

// extend adds nodes to the data-plane step in flight: they apply from now.
func extend(r *api.Rollout, nodes []string, now time.Time) {
	r.Status.Current = append(r.Status.Current, nodes...)
	for _, name := range nodes {
		p := r.Node(name)
		p.Phase, p.StartedAt, p.FinishedAt, p.Message = api.NodeApplying, now, time.Time{}, ""
	}
}

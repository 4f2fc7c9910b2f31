package events

import (
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of rollouts and generations.
const (
	RolloutStarted     = "RolloutStarted"
	RolloutPaused      = "RolloutPaused"
	RolloutResumed     = "RolloutResumed"
	RolloutHalted      = "RolloutHalted"
	RolloutUndoing     = "RolloutUndoing"
	RolloutSucceeded   = "RolloutSucceeded"
	RolloutUndone      = "RolloutUndone"
	NodeUpdated        = "NodeUpdated"
	NodeUpdateFailed   = "NodeUpdateFailed"
	RolledBack         = "RolledBack"
	GenerationApplying = "GenerationApplying"
	GenerationApplied  = "GenerationApplied"
	GenerationFailed   = "GenerationFailed"
)

// deriveRollout: the rollout's start, its phase changes and each node that
// finished its step (updated, failed, rolled back to what it had before).
// A step's start is the RolloutStep line of its operation.
func deriveRollout(c Change) ([]Event, error) {
	prev, cur, err := decode[api.Rollout](c)
	if err != nil || cur == nil {
		return nil, err
	}
	name := store.Name(c.Key)
	st := cur.Status
	var out []Event
	add := func(e Event) { out = append(out, e) }
	if !st.StartedAt.IsZero() && (prev == nil || prev.Status.StartedAt.IsZero()) {
		add(c.event(st.StartedAt, api.KindRollout, name, Normal, RolloutStarted,
			fmt.Sprintf("rollout %s started on %d nodes: %s", name, len(st.Nodes), nodeNames(st.Nodes)), ""))
	}
	// The previous nodes by name: a rollout of many nodes changes a few
	// of them per write.
	prevNodes := map[string]*api.NodeProgress{}
	if prev != nil {
		for i := range prev.Status.Nodes {
			prevNodes[prev.Status.Nodes[i].Name] = &prev.Status.Nodes[i]
		}
	}
	for _, p := range st.Nodes {
		if q := prevNodes[p.Name]; q != nil && q.Phase == p.Phase && q.FinishedAt.Equal(p.FinishedAt) {
			continue
		}
		switch p.Phase {
		case api.NodeDone:
			add(c.event(p.FinishedAt, api.KindRollout, name, Normal, NodeUpdated,
				fmt.Sprintf("%s runs generation %d of rollout %s", p.Name, p.Generation, name), "", p.Name))
		case api.NodeRollFailed:
			add(c.event(p.FinishedAt, api.KindRollout, name, Warning, NodeUpdateFailed,
				fmt.Sprintf("%s failed generation %d of rollout %s: %s", p.Name, p.Generation, name, orDash(p.Message)), "", p.Name))
		case api.NodeReverted:
			add(c.event(p.FinishedAt, api.KindRollout, name, Normal, RolledBack,
				fmt.Sprintf("%s rolled back to its configuration before rollout %s (generation %d)", p.Name, name, p.Generation), "", p.Name))
		}
	}
	if prev != nil && prev.Status.Phase == st.Phase {
		return out, nil
	}
	before := api.RolloutPending
	if prev != nil {
		before = prev.Status.Phase
	}
	switch st.Phase {
	case api.RolloutPaused:
		add(c.event(st.UpdatedAt, api.KindRollout, name, Normal, RolloutPaused, fmt.Sprintf("rollout %s paused", name), ""))
	case api.RolloutRunning:
		if before == api.RolloutPaused {
			add(c.event(st.UpdatedAt, api.KindRollout, name, Normal, RolloutResumed, fmt.Sprintf("rollout %s resumed", name), ""))
		}
	case api.RolloutHalted:
		at := st.UpdatedAt
		if p := cur.Node(st.HaltedNode); p != nil {
			at = firstSet(p.FinishedAt, at)
		}
		add(c.event(at, api.KindRollout, name, Warning, RolloutHalted,
			fmt.Sprintf("rollout %s halted at %s: %s", name, orDash(st.HaltedNode), orDash(st.HaltedReason)), "", st.HaltedNode))
	case api.RolloutUndoing:
		add(c.event(st.UpdatedAt, api.KindRollout, name, Normal, RolloutUndoing,
			fmt.Sprintf("rollout %s is being undone: the nodes it touched go back to what they had", name), ""))
	case api.RolloutSucceeded:
		done, total := cur.Counts()
		add(c.event(firstSet(st.FinishedAt, st.UpdatedAt), api.KindRollout, name, Normal, RolloutSucceeded,
			fmt.Sprintf("rollout %s succeeded: %d of %d nodes updated", name, done, total), ""))
	case api.RolloutUndone:
		add(c.event(firstSet(st.FinishedAt, st.UpdatedAt), api.KindRollout, name, Normal, RolloutUndone,
			fmt.Sprintf("rollout %s undone", name), ""))
	}
	return out, nil
}

func nodeNames(ps []api.NodeProgress) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return orDash(strings.Join(names, ", "))
}

// deriveGeneration: a machine's agent starting a generation, and each
// outcome it recorded.
func deriveGeneration(c Change) ([]Event, error) {
	prev, cur, err := decode[api.NixosConfiguration](c)
	if err != nil || cur == nil {
		return nil, err
	}
	name := store.Name(c.Key)
	var out []Event
	st := cur.Status
	if st.Phase == api.GenerationApplying && (prev == nil || prev.Status.Phase != api.GenerationApplying || prev.Status.Generation != st.Generation || prev.Status.Attempt != st.Attempt) {
		out = append(out, c.event(st.UpdatedAt, api.KindNixosConfiguration, name, Normal, GenerationApplying,
			fmt.Sprintf("%s applies generation %d (attempt %d)", name, st.Generation, st.Attempt), "", name))
	}
	var old []api.GenerationRecord
	if prev != nil {
		old = prev.Status.History
	}
	for _, r := range newRecords(old, st.History) {
		switch r.Phase {
		case api.GenerationApplied:
			msg := fmt.Sprintf("%s runs generation %d", name, r.Generation)
			if r.Toplevel != "" {
				msg += " (" + r.Toplevel + ")"
			}
			if r.Message != "" {
				msg += ": " + r.Message
			}
			out = append(out, c.event(r.Finished, api.KindNixosConfiguration, name, Normal, GenerationApplied, msg, "", name))
		case api.GenerationFailed:
			out = append(out, c.event(r.Finished, api.KindNixosConfiguration, name, Warning, GenerationFailed,
				fmt.Sprintf("generation %d failed on %s: %s", r.Generation, name, orDash(r.Message)), "", name))
		}
	}
	return out, nil
}

// newRecords returns the records of cur after the last one of old.
func newRecords(old, cur []api.GenerationRecord) []api.GenerationRecord {
	if len(old) == 0 {
		return cur
	}
	last := old[len(old)-1]
	for i := len(cur) - 1; i >= 0; i-- {
		r := cur[i]
		if r.Generation == last.Generation && r.Phase == last.Phase && r.Started.Equal(last.Started) && r.Finished.Equal(last.Finished) {
			return cur[i+1:]
		}
	}
	var out []api.GenerationRecord
	for _, r := range cur {
		if r.Finished.After(last.Finished) {
			out = append(out, r)
		}
	}
	return out
}

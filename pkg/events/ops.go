package events

import (
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of the operation journal.
const (
	JoinStarted       = "JoinStarted"
	LearnerAdded      = "LearnerAdded"
	LearnerProgress   = "LearnerProgress"
	Promoted          = "Promoted"
	Joined            = "Joined"
	JoinFailed        = "JoinFailed"
	RemovalStarted    = "RemovalStarted"
	LeadershipMoved   = "LeadershipMoved"
	RemovingMember    = "RemovingMember"
	Removed           = "Removed"
	RemovalFailed     = "RemovalFailed"
	RolloutStep       = "RolloutStep"
	RolloutStepDone   = "RolloutStepDone"
	RolloutStepFailed = "RolloutStepFailed"
	OpStarted         = "OpStarted"
	OpStep            = "OpStep"
	OpSucceeded       = "OpSucceeded"
	OpFailed          = "OpFailed"
)

// deriveOp turns each history line an operation gained into an event.
func deriveOp(c Change) ([]Event, error) {
	prev, cur, err := decode[api.Operation](c)
	if err != nil || cur == nil {
		return nil, err
	}
	var old []api.Event
	if prev != nil {
		old = prev.Status.History
	}
	added := newEntries(old, cur.Status.History)
	h := cur.Status.History
	var out []Event
	for i, e := range added {
		first := len(h)-len(added)+i == 0 && len(h) < api.MaxHistory
		last := i == len(added)-1 && cur.Status.Phase != api.OpRunning
		typ, reason, msg := classifyOp(cur, e, first, last)
		nodes := strings.Split(cur.Spec.Node, ",")
		out = append(out, c.event(e.At, api.KindOperation, store.Name(c.Key), typ, reason, msg, store.Name(c.Key), nodes...))
	}
	return out, nil
}

// newEntries returns the lines of cur after the last line of old (the
// history keeps its newest api.MaxHistory lines, so old's first lines may
// be gone from cur).
func newEntries(old, cur []api.Event) []api.Event {
	if len(old) == 0 {
		return cur
	}
	last := old[len(old)-1]
	for i := len(cur) - 1; i >= 0; i-- {
		if sameEntry(cur[i], last) {
			return cur[i+1:]
		}
	}
	var out []api.Event
	for _, e := range cur {
		if e.At.After(last.At) {
			out = append(out, e)
		}
	}
	return out
}

func sameEntry(a, b api.Event) bool {
	return a.At.Equal(b.At) && a.Step == b.Step && a.Leader == b.Leader && a.Message == b.Message
}

// classifyOp names one history line: the journal's lines are written by
// the coordinator's executor (coordinator/executor.go, rollout.go), one
// per step; a line this package does not know is an OpStep.
func classifyOp(op *api.Operation, e api.Event, first, last bool) (typ, reason, msg string) {
	node := op.Spec.Node
	failed := last && op.Status.Phase == api.OpFailed
	done := last && op.Status.Phase == api.OpSucceeded
	by := ""
	if e.Leader != "" {
		by = " (by " + e.Leader + ")"
	}
	switch op.Spec.Type {
	case api.OpJoin:
		switch {
		case failed:
			return Warning, JoinFailed, fmt.Sprintf("join of %s failed: %s", node, e.Message)
		case done:
			return Normal, Joined, fmt.Sprintf("%s joined: %s", node, e.Message)
		case e.Message == "started":
			return Normal, JoinStarted, fmt.Sprintf("join of %s started, peer URL %s%s", node, orDash(op.Spec.PeerURL), by)
		case strings.HasPrefix(e.Message, "learner ") && strings.HasSuffix(e.Message, " added"):
			return Normal, LearnerAdded, fmt.Sprintf("%s for %s%s", e.Message, node, by)
		case strings.HasPrefix(e.Message, "learner ") && strings.HasSuffix(e.Message, " promoted"):
			return Normal, Promoted, fmt.Sprintf("%s: %s is a voter%s", e.Message, node, by)
		case strings.HasPrefix(e.Message, "learner at raft index"):
			return Normal, LearnerProgress, fmt.Sprintf("%s learner at raft index%s", node, strings.TrimPrefix(e.Message, "learner at raft index"))
		}
	case api.OpRemove:
		switch {
		case failed:
			return Warning, RemovalFailed, fmt.Sprintf("removal of %s failed: %s", node, e.Message)
		case done:
			return Normal, Removed, fmt.Sprintf("%s removed from the etcd cluster%s", node, by)
		case e.Message == "started":
			force := ""
			if op.Spec.Force {
				force = ", forced"
			}
			return Normal, RemovalStarted, fmt.Sprintf("removal of %s (member %s%s) started%s", node, op.Spec.MemberID, force, by)
		case strings.HasPrefix(e.Message, "moved etcd leadership"):
			return Normal, LeadershipMoved, e.Message + by
		case strings.HasPrefix(e.Message, "removing member"):
			return Normal, RemovingMember, fmt.Sprintf("%s of %s%s", e.Message, node, by)
		}
	case api.OpRolloutStep:
		switch {
		case failed:
			return Warning, RolloutStepFailed, fmt.Sprintf("step of rollout %s on %s halted%s", op.Spec.Request, node, by)
		case done:
			return Normal, RolloutStepDone, fmt.Sprintf("step of rollout %s on %s finished%s", op.Spec.Request, node, by)
		case first:
			return Normal, RolloutStep, fmt.Sprintf("rollout %s applies its generation to %s%s", op.Spec.Request, node, by)
		}
	}
	switch {
	case failed:
		return Warning, OpFailed, fmt.Sprintf("%s operation on %s failed: %s", op.Spec.Type, node, e.Message)
	case done:
		return Normal, OpSucceeded, fmt.Sprintf("%s operation on %s succeeded: %s", op.Spec.Type, node, e.Message)
	case first:
		return Normal, OpStarted, fmt.Sprintf("%s operation on %s started: %s%s", op.Spec.Type, node, e.Message, by)
	}
	step := ""
	if e.Step != "" {
		step = string(e.Step) + ": "
	}
	return Normal, OpStep, fmt.Sprintf("%s %s%s%s", op.Spec.Type, step, e.Message, by)
}

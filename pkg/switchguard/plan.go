// Package switchguard plans the switch slot: a control-plane host about to
// switch its NixOS generation by hand (nixos-rebuild, colmena, deploy-rs)
// asks, through its pre-switch check, for the one-change-in-flight slot
// (store.ActiveOpKey) that nico's own membership changes, rollout steps,
// version steps and defragmentations take, so that the two never overlap
// and two such hosts never switch at once. Plan is pure: it reads the
// hosts' requests, etcd's members and the operation holding the slot, and
// returns the next step; the coordinator's switch-guard controller applies
// it.
//
//	request (attempt n)
//	  |
//	  +-- no etcd member on the host -------------------------> Answer Granted (no slot)
//	  +-- nico's rollout step of this host holds the slot -----> Answer Granted (under that step)
//	  +-- another operation holds the slot --------------------> Answer Waiting (names it)
//	  +-- etcd has 2 voters: one down is below quorum ---------> Answer Refused
//	  +-- no leader, or quorum lost with the member down ------> Answer Waiting (why)
//	  +-- otherwise (the oldest request first) ----------------> Take (journal OpSwitch, take the slot)
//	                                                              |
//	      the host's member leads: TransferLeader, then Grant <---+---> Granted at once
//	                                                              |
//	      agent: switched, member healthy ----> Release (Released)
//	      the hold passed ----------------------> Release (Expired)
//	      the request withdrawn or re-asked ----> Release
//
// A cluster whose only voter is the host switches in place (as a rollout
// rolls it): there is no quorum to keep and no one to wait for; the slot
// still keeps nico's own operations off it meanwhile.
package switchguard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
)

// Override is the environment variable (and its value) that makes a
// pre-switch check pass without asking for the slot.
const Override = "NICO_SWITCH_GUARD=off"

// Observed is the planner's input.
type Observed struct {
	Requests []*api.SwitchRequest
	// Members are etcd's members, matched to their nodes.
	Members []membership.Member
	// Active is the operation holding the slot, nil when none does.
	Active *api.Operation
}

// Action is what the controller does.
type Action string

// Actions.
const (
	None           Action = "None"
	Wait           Action = "Wait"           // the slot's holder is not done yet
	Answer         Action = "Answer"         // write Request's status (Phase, Reason, Op): no slot taken
	Take           Action = "Take"           // journal an OpSwitch for Request and take the slot
	TransferLeader Action = "TransferLeader" // move etcd leadership from Member (at LeaderURL) to To
	Grant          Action = "Grant"          // the held operation's host may switch now
	Release        Action = "Release"        // close the held operation, free the slot
)

// Step is the planner's decision.
type Step struct {
	Action Action
	// Request is the host (its request's name); Attempt the attempt the
	// step answers.
	Request, Attempt string
	// Phase is the status written (Answer, Take, Grant, Release).
	Phase api.SwitchPhase
	// Op is the operation: Take's new one, the held one, or for Answer
	// Granted under nico's rollout step, that step.
	Op string
	// Transfer: Take's operation starts at StepTransferLeader, the host's
	// member leading.
	Transfer bool
	// Member, To, LeaderURL: TransferLeader.
	Member, To api.MemberID
	LeaderURL  string
	// OK: Release's outcome (the operation succeeded).
	OK bool
	// Hold is the request's hold (Take, Grant).
	Hold   time.Duration
	Reason string
}

func (s Step) String() string {
	out := string(s.Action)
	if s.Request != "" {
		out += " " + s.Request
	}
	if s.Phase != "" {
		out += " " + string(s.Phase)
	}
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}

// OpName is the name of the operation that holds the slot for attempt of
// node's request.
func OpName(node, attempt string) string { return "switch-" + node + "-" + attempt }

// Plan returns the next step. It is pure.
func Plan(obs Observed, now time.Time) Step {
	idle := Step{Action: None}
	heldFor := ""
	if a := obs.Active; a != nil && a.Spec.Type == api.OpSwitch {
		// While the held switch waits, the other asks are answered (a
		// host with no member is not held up by it).
		if idle = planHeld(obs, a, now); idle.Action != Wait {
			return idle
		}
		heldFor = a.Spec.Node + "/" + a.Spec.Request
	}
	reqs := slices.Clone(obs.Requests)
	slices.SortStableFunc(reqs, func(a, b *api.SwitchRequest) int {
		if c := a.Spec.RequestedAt.Compare(b.Spec.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	for _, r := range reqs {
		if !open(r) || r.Metadata.Name+"/"+r.Spec.Attempt == heldFor {
			continue
		}
		s := planAsk(obs, r)
		if s.Action == Take || changes(r, s) {
			return s
		}
	}
	return idle
}

// open tells whether r is an ask still to answer: none yet, or Waiting.
func open(r *api.SwitchRequest) bool {
	if r.Spec.Attempt == "" || !r.Spec.SwitchedAt.IsZero() {
		return false
	}
	return !r.Answered() || r.Status.Phase == api.SwitchWaiting
}

// changes tells whether answering r with s writes anything new.
func changes(r *api.SwitchRequest, s Step) bool {
	return !r.Answered() || r.Status.Phase != s.Phase || r.Status.Message != s.Reason || r.Status.Operation != s.Op
}

// planAsk answers one open request while no switch holds the slot.
func planAsk(obs Observed, r *api.SwitchRequest) Step {
	node := r.Metadata.Name
	base := Step{Request: node, Attempt: r.Spec.Attempt}
	answer := func(p api.SwitchPhase, op, why string) Step {
		s := base
		s.Action, s.Phase, s.Op, s.Reason = Answer, p, op, why
		return s
	}
	if h := time.Duration(r.Spec.Hold); h != 0 && (h < api.MinSwitchHold || h > api.MaxSwitchHold) {
		return answer(api.SwitchRefused, "", fmt.Sprintf("spec.hold is %s; accepted: %s to %s (0: %s)", h, api.MinSwitchHold, api.MaxSwitchHold, api.DefaultSwitchHold))
	}
	m := memberOf(obs.Members, node)
	if m == nil {
		return answer(api.SwitchGranted, "", node+" runs no etcd member: its switch restarts none, so it takes no slot")
	}
	if a := obs.Active; a != nil {
		if a.Spec.Type == api.OpRolloutStep && slices.Contains(strings.Split(a.Spec.Node, ","), node) {
			return answer(api.SwitchGranted, a.Metadata.Name, "nico's rollout step "+a.Metadata.Name+" holds the slot for "+node)
		}
		return answer(api.SwitchWaiting, "", "the slot is held by "+Describe(a)+"; the switch waits until it ends")
	}
	voters := 0
	for _, x := range obs.Members {
		if !x.Learner {
			voters++
		}
	}
	take := base
	take.Action, take.Op, take.Hold = Take, OpName(node, r.Spec.Attempt), r.Spec.HoldOrDefault()
	if !m.Learner && voters == 1 {
		take.Phase = api.SwitchGranted
		take.Reason = node + " runs etcd's only voter: it switches in place, and etcd serves no one while its member restarts"
		return take
	}
	if !m.Learner && voters == 2 {
		return answer(api.SwitchRefused, "", fmt.Sprintf("etcd has 2 voters: with %s's member down 1 of 2 is left, below quorum 2, so the switch would stop etcd; "+
			"add a third control-plane host first (EtcdCluster spec.voters), or switch with %s accepting the outage", node, Override))
	}
	if leaderOf(obs.Members) == nil {
		return answer(api.SwitchWaiting, "", "etcd has no leader")
	}
	if p := Down(obs.Members, m.ID); !p.OK {
		return answer(api.SwitchWaiting, "", "with "+node+"'s member down "+p.Reason)
	}
	if m.Leader {
		if membership.Successor(obs.Members, m.ID) == nil {
			return answer(api.SwitchWaiting, "", node+" leads etcd and no healthy voter can take leadership")
		}
		take.Transfer, take.Phase = true, api.SwitchWaiting
		take.Reason = node + " leads etcd: moving leadership away before it switches"
		return take
	}
	take.Phase = api.SwitchGranted
	take.Reason = fmt.Sprintf("quorum holds with %s's member down (%d voters)", node, voters)
	return take
}

// Down projects the cluster with member id stopped: still a voter (a
// switch removes no one, so quorum stays that of every voter), but not a
// healthy one.
func Down(ms []membership.Member, id api.MemberID) membership.Projection {
	down := slices.Clone(ms)
	for i := range down {
		if down[i].ID == id {
			down[i].Healthy = false
		}
	}
	return membership.Project(down, membership.Change{})
}

// planHeld follows the switch holding the slot.
func planHeld(obs Observed, op *api.Operation, now time.Time) Step {
	node := op.Spec.Node
	base := Step{Request: node, Attempt: op.Spec.Request, Op: op.Metadata.Name}
	release := func(ok bool, p api.SwitchPhase, why string) Step {
		s := base
		s.Action, s.OK, s.Phase, s.Reason = Release, ok, p, why
		return s
	}
	var r *api.SwitchRequest
	for _, x := range obs.Requests {
		if x.Metadata.Name == node {
			r = x
		}
	}
	if r == nil || r.Spec.Attempt != op.Spec.Request {
		return release(false, "", "the request of "+node+" was withdrawn or asked again")
	}
	hold := r.Spec.HoldOrDefault()
	base.Hold = hold
	expired := !now.Before(op.Status.StepSince.Add(hold))
	m := memberOf(obs.Members, node)
	switch op.Status.Step {
	case api.StepTransferLeader:
		if m != nil && m.Leader {
			if expired {
				return release(false, api.SwitchExpired, fmt.Sprintf("leadership did not move off %s within %s", node, hold))
			}
			to := membership.Successor(obs.Members, m.ID)
			if to == nil {
				s := base
				s.Action, s.Reason = Wait, node+" leads etcd and no healthy voter can take leadership"
				return s
			}
			s := base
			s.Action, s.Member, s.To = TransferLeader, m.ID, to.ID
			if len(m.ClientURLs) > 0 {
				s.LeaderURL = m.ClientURLs[0]
			}
			s.Reason = fmt.Sprintf("%s leads etcd: moving leadership to %s before it switches", node, label(to))
			return s
		}
		s := base
		s.Action, s.Phase, s.Reason = Grant, api.SwitchGranted, "leadership moved off "+node+"; quorum holds with its member down"
		return s
	case api.StepSwitching:
		if !r.Spec.SwitchedAt.IsZero() {
			if m == nil {
				return release(true, api.SwitchReleased, node+" switched; its member is gone")
			}
			if m.Healthy && leaderOf(obs.Members) != nil {
				return release(true, api.SwitchReleased, fmt.Sprintf("%s switched to %s and its member is healthy", node, r.Spec.Toplevel))
			}
		}
		if expired {
			return release(false, api.SwitchExpired, fmt.Sprintf("%s did not report its member healthy on %s within its hold (%s); the slot is taken back", node, r.Spec.Toplevel, hold))
		}
		s := base
		s.Action, s.Reason = Wait, "waiting for "+node+" to switch and its member to serve, healthy"
		if !r.Spec.SwitchedAt.IsZero() {
			s.Reason = node + " switched; waiting for its member to serve, healthy"
		}
		return s
	default:
		return release(false, "", fmt.Sprintf("switch operation at unknown step %q", op.Status.Step))
	}
}

// Describe names an operation holding the slot, for a refusal.
func Describe(op *api.Operation) string {
	what := map[api.OpType]string{
		api.OpJoin:        "the join of",
		api.OpRemove:      "the removal of",
		api.OpRolloutStep: "the rollout step on",
		api.OpDefrag:      "the defragmentation of",
		api.OpSwitch:      "the switch of",
		api.OpRestore:     "the restore by",
		api.OpRecover:     "the recovery by",
	}[op.Spec.Type]
	if what == "" {
		what = string(op.Spec.Type) + " of"
	}
	node := op.Spec.Node
	if node == "" {
		node = op.Spec.MemberID.String()
	}
	return fmt.Sprintf("%s %s (operation %s)", what, node, op.Metadata.Name)
}

func memberOf(ms []membership.Member, node string) *membership.Member {
	for i := range ms {
		if ms[i].Node == node {
			return &ms[i]
		}
	}
	return nil
}

func leaderOf(ms []membership.Member) *membership.Member {
	for i := range ms {
		if ms[i].Leader {
			return &ms[i]
		}
	}
	return nil
}

func label(m *membership.Member) string {
	if m.Node != "" {
		return m.Node
	}
	if m.Name != "" {
		return m.Name
	}
	return m.ID.String()
}

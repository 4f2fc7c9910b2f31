package membership

import (
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Action is what a Step asks the executor to do.
type Action string

// Actions.
const (
	// None: nothing to do; wait for a change.
	None Action = "None"
	// Wait: something is in the way; Reason says what. Re-plan later.
	Wait Action = "Wait"

	StartJoin    Action = "StartJoin"    // journal a new join operation (Op)
	AddLearner   Action = "AddLearner"   // MemberAddAsLearner(Op.Spec.PeerURL)
	AdoptLearner Action = "AdoptLearner" // the learner exists already: record Member in the journal
	Promote      Action = "Promote"      // Member serves clients: promote it through Voters once etcd accepts (and it still serves)
	AbortJoin    Action = "AbortJoin"    // remove learner Member (if any); fail the op; tell the node to wipe and retry
	FinishJoin   Action = "FinishJoin"   // the member is a voter: close the op (if any) and the request
	MarkStandby  Action = "MarkStandby"  // the cluster has its voters: mark join request Request a standby (Reason says why)

	StartRemove    Action = "StartRemove"    // journal a new removal operation (Op)
	RefuseRemove   Action = "RefuseRemove"   // the request is unsafe or invalid; Reason says why
	TransferLeader Action = "TransferLeader" // move leadership from Member (at LeaderURL) to To
	RemoveMember   Action = "RemoveMember"   // MemberRemove(Member)
	FinishRemove   Action = "FinishRemove"   // the member is gone: close the op and the request
	FailOp         Action = "FailOp"         // the active op cannot go on; Reason says why
	FileRemoval    Action = "FileRemoval"    // file a removal request for node Request (a dead voter)

	RecordExternal Action = "RecordExternal" // record external member External as on-boarded (at PeerURL)
	ForgetExternal Action = "ForgetExternal" // external member External is gone: drop its record
)

// NudgeAfter is how long a learner may go unanswering before the
// executor nudges the cluster with a write (Step.Nudge). A learner is
// promoted only once it serves, so no promotion writes for it meanwhile; a
// learner that got its log as a snapshot in a quiet cluster waits for this
// write to publish itself, and a join there takes at least this long.
const NudgeAfter = 250 * time.Millisecond

// NudgeEvery bounds the rate of the nudges.
const NudgeEvery = time.Second

// Step is the one next thing to do.
type Step struct {
	Action Action
	// Op is the operation the step belongs to: the active one, or for
	// StartJoin and StartRemove the one to create.
	Op *api.Operation
	// Request names the join or remove request concerned.
	Request string
	Member  api.MemberID
	// To is the new leader for TransferLeader.
	To api.MemberID
	// LeaderURL is the current etcd leader's client URL.
	LeaderURL string
	// Voters are healthy voters' client URLs, leader first (for Promote).
	Voters []string
	// LearnerURL is the learner's client URL, to watch its progress.
	LearnerURL string
	// External names the external member of RecordExternal and
	// ForgetExternal, and PeerURL is the peer URL to record.
	External string
	PeerURL  string
	// Retry tells the node of an aborted join to wipe and file again.
	Retry bool
	// Standby, for FileRemoval, keeps the node as a standby: a voter shed
	// because spec.voters was lowered is not released.
	Standby bool
	// Nudge asks the executor for one small write to the cluster before
	// the step (at most once per NudgeEvery): the learner has not answered
	// for NudgeAfter while the cluster is healthy. A learner that got its
	// log as a snapshot cannot publish itself until an entry after the
	// snapshot is applied (docs/etcd-snapshot-join.md).
	Nudge  bool
	Reason string
}

func (s Step) String() string {
	out := string(s.Action)
	if s.Op != nil {
		out += fmt.Sprintf(" op=%s", s.Op.Metadata.Name)
	}
	if s.Request != "" {
		out += " node=" + s.Request
	}
	if s.External != "" {
		out += " external=" + s.External
	}
	if s.Member != 0 {
		out += " member=" + s.Member.String()
	}
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}

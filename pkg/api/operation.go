package api

import "time"

// Operation is one membership change, journaled by the leader before it acts
// so that the next leader can resume or undo it. At most one is active.
type Operation struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     OperationSpec   `json:"spec"`
	Status   OperationStatus `json:"status"`
}

// OpType is the kind of change.
type OpType string

// Operation types.
const (
	OpJoin   OpType = "Join"
	OpRemove OpType = "Remove"
)

// OperationSpec says what the change is.
type OperationSpec struct {
	Type      OpType   `json:"type"`
	Node      string   `json:"node"`
	PeerURL   string   `json:"peerURL,omitempty"`
	ClientURL string   `json:"clientURL,omitempty"`
	MemberID  MemberID `json:"memberID,omitempty"`
	Force     bool     `json:"force,omitempty"`
	// Request is the name of the join or remove request it serves.
	Request string `json:"request,omitempty"`
	// StartedBy is the coordinator candidate that created it.
	StartedBy string `json:"startedBy,omitempty"`
	// External marks a change of an external member (EtcdCluster
	// spec.members): Node is then the member's name, not a registered
	// node, and no request, node record or agent goes with it.
	External bool `json:"external,omitempty"`
}

// OpStep is where an operation is.
//
// Join:   AddLearner -> Learner (wait for start, catch up, promote) -> done
// Remove: TransferLeader (when the target leads) -> RemoveMember -> done
type OpStep string

// Operation steps.
const (
	StepAddLearner     OpStep = "AddLearner"
	StepLearner        OpStep = "Learner"
	StepTransferLeader OpStep = "TransferLeader"
	StepRemoveMember   OpStep = "RemoveMember"
	StepDone           OpStep = "Done"
)

// OpPhase is the outcome of an operation.
type OpPhase string

// Operation phases.
const (
	OpRunning   OpPhase = "Running"
	OpSucceeded OpPhase = "Succeeded"
	OpFailed    OpPhase = "Failed"
)

// OperationStatus is the journal.
type OperationStatus struct {
	Phase     OpPhase   `json:"phase"`
	Step      OpStep    `json:"step"`
	StepSince time.Time `json:"stepSince"`
	// LearnerIndex is the learner's last seen raft index, and ProgressAt when
	// it last grew: a learner that stops catching up is removed.
	LearnerIndex uint64    `json:"learnerIndex,omitempty"`
	ProgressAt   time.Time `json:"progressAt,omitempty"`
	Leader       string    `json:"leader,omitempty"`
	Message      string    `json:"message,omitempty"`
	UpdatedAt    time.Time `json:"updatedAt"`
	History      []Event   `json:"history,omitempty"`
}

// Event is one line of an operation's history.
type Event struct {
	At      time.Time `json:"at"`
	Step    OpStep    `json:"step"`
	Leader  string    `json:"leader,omitempty"`
	Message string    `json:"message"`
}

// MaxHistory bounds an operation's history.
const MaxHistory = 32

// Record appends an event, keeping the newest MaxHistory.
func (o *Operation) Record(at time.Time, leader, msg string) {
	o.Status.History = append(o.Status.History, Event{At: at, Step: o.Status.Step, Leader: leader, Message: msg})
	if n := len(o.Status.History); n > MaxHistory {
		o.Status.History = o.Status.History[n-MaxHistory:]
	}
	o.Status.Message = msg
	o.Status.UpdatedAt = at
}

// NewOperation returns an Operation named id.
func NewOperation(id string) *Operation {
	return &Operation{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindOperation}, Metadata: ObjectMeta{Name: id}}
}

// GetTypeMeta implements Object.
func (o *Operation) GetTypeMeta() *TypeMeta { return &o.TypeMeta }

// GetMetadata implements Object.
func (o *Operation) GetMetadata() *ObjectMeta { return &o.Metadata }

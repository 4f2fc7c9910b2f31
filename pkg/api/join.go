package api

import "time"

// JoinRequest is filed by a control-plane agent that wants its etcd member
// added to the cluster. The agent writes spec; the leader writes status.
type JoinRequest struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta        `json:"metadata"`
	Spec     JoinRequestSpec   `json:"spec"`
	Status   JoinRequestStatus `json:"status"`
}

// JoinRequestSpec is the request.
type JoinRequestSpec struct {
	Node      string `json:"node"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL"`
	// Attempt counts the agent's tries; a new attempt after a failure
	// replaces the request.
	Attempt int `json:"attempt"`
}

// JoinPhase is the progress of a join request.
type JoinPhase string

// Join phases.
//
//	Pending (Standby while the cluster has its voters) --(leader adds learner)--> LearnerAdded --(promoted)--> Joined
//	   |                                   |
//	   +-------------(refused)             +--(never started, stalled)--> Failed (Retry: wipe and file again)
const (
	JoinPending      JoinPhase = ""
	JoinLearnerAdded JoinPhase = "LearnerAdded"
	JoinJoined       JoinPhase = "Joined"
	JoinFailed       JoinPhase = "Failed"
)

// JoinRequestStatus is the leader's answer.
type JoinRequestStatus struct {
	Phase JoinPhase `json:"phase,omitempty"`
	// MemberID is the learner's ID once added.
	MemberID MemberID `json:"memberID,omitempty"`
	// InitialCluster is the --initial-cluster value the member must start
	// with, with state "existing".
	InitialCluster string `json:"initialCluster,omitempty"`
	// Retry tells the agent to wipe its data dir and file a new attempt.
	Retry bool `json:"retry,omitempty"`
	// Standby is set while the request is pending because the cluster has
	// the voters its EtcdCluster asks for: the node is a standby,
	// registered and ready but not a member, and is the first to be added
	// when a voter is wanted (spec.voters raised, a dead voter replaced).
	Standby   bool      `json:"standby,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Message   string    `json:"message,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitempty"`
}

// NewJoinRequest returns a JoinRequest for node.
func NewJoinRequest(node string) *JoinRequest {
	return &JoinRequest{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindJoinRequest}, Metadata: ObjectMeta{Name: node}}
}

// GetTypeMeta implements Object.
func (j *JoinRequest) GetTypeMeta() *TypeMeta { return &j.TypeMeta }

// GetMetadata implements Object.
func (j *JoinRequest) GetMetadata() *ObjectMeta { return &j.Metadata }

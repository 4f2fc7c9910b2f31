package api

import "time"

// RemoveRequest asks the leader to take a node out of the etcd cluster
// (nicoctl remove node, or the agent's own leave). People or the agent write
// spec; the leader writes status.
type RemoveRequest struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta          `json:"metadata"`
	Spec     RemoveRequestSpec   `json:"spec"`
	Status   RemoveRequestStatus `json:"status"`
}

// RemoveRequestSpec is the request.
type RemoveRequestSpec struct {
	Node string `json:"node"`
	// Force skips the quorum check. The last member is never removed.
	Force       bool   `json:"force,omitempty"`
	RequestedBy string `json:"requestedBy,omitempty"`
	// Standby keeps the node in the fleet as a standby: its member is
	// removed and its data wiped, but the machine is not released; its
	// agent starts again and files a new join request. The leader sheds
	// voters this way when spec.voters is lowered.
	Standby bool `json:"standby,omitempty"`
}

// RemovePhase is the progress of a removal.
//
//	Pending --(safe)--> Running --(member removed)--> Done
//	   |                   |
//	   +--(unsafe)--> Refused   +--(error)--> Failed
type RemovePhase string

// Removal phases.
const (
	RemovePending RemovePhase = ""
	RemoveRunning RemovePhase = "Running"
	RemoveDone    RemovePhase = "Done"
	RemoveRefused RemovePhase = "Refused"
	RemoveFailed  RemovePhase = "Failed"
)

// Finished tells whether the phase is final.
func (p RemovePhase) Finished() bool {
	return p == RemoveDone || p == RemoveRefused || p == RemoveFailed
}

// RemoveRequestStatus is the leader's answer.
type RemoveRequestStatus struct {
	Phase     RemovePhase `json:"phase,omitempty"`
	Operation string      `json:"operation,omitempty"`
	Message   string      `json:"message,omitempty"`
	UpdatedAt time.Time   `json:"updatedAt,omitempty"`
	// IdentityRevokedAt is when the leader deleted the removed node's etcd
	// user and role (its certificate then reaches nothing); zero: not yet.
	IdentityRevokedAt time.Time `json:"identityRevokedAt,omitzero"`
}

// NewRemoveRequest returns a RemoveRequest for node.
func NewRemoveRequest(node string) *RemoveRequest {
	return &RemoveRequest{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindRemoveRequest}, Metadata: ObjectMeta{Name: node}, Spec: RemoveRequestSpec{Node: node}}
}

// GetTypeMeta implements Object.
func (r *RemoveRequest) GetTypeMeta() *TypeMeta { return &r.TypeMeta }

// GetMetadata implements Object.
func (r *RemoveRequest) GetMetadata() *ObjectMeta { return &r.Metadata }

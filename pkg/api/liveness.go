package api

import "time"

// KindLiveness is the kind of Liveness.
const KindLiveness = "Liveness"

// Liveness is the coordinator leader's view of every node's liveness,
// gossip and heartbeat lease together. There is one, named "cluster",
// written by the leader whenever a node's state changes.
type Liveness struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta     `json:"metadata"`
	Status   LivenessStatus `json:"status"`
}

// LivenessStatus is what the leader observed.
type LivenessStatus struct {
	// Nodes maps node name to its liveness.
	Nodes map[string]NodeLiveness `json:"nodes"`
	// Leader is the coordinator that wrote it.
	Leader    string    `json:"leader,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// NodeLiveness is one node's liveness.
type NodeLiveness struct {
	State  string    `json:"state"` // alive, suspect or dead
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
}

// NewLiveness returns a Liveness with its type filled in.
func NewLiveness() *Liveness {
	return &Liveness{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindLiveness}, Metadata: ObjectMeta{Name: "cluster"}}
}

// GetTypeMeta implements Object.
func (l *Liveness) GetTypeMeta() *TypeMeta { return &l.TypeMeta }

// GetMetadata implements Object.
func (l *Liveness) GetMetadata() *ObjectMeta { return &l.Metadata }

package api

import (
	"fmt"
	"slices"
	"time"
)

// Role is what a machine does in the fleet.
type Role string

// Roles a node can have.
const (
	RoleControlPlane Role = "controlPlane"
	RoleWorker       Role = "worker"
)

// Node is one machine, registered by its own agent.
type Node struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status"`
}

// NodeSpec is what the agent declares about its machine.
type NodeSpec struct {
	Roles     []Role `json:"roles"`
	Bootstrap bool   `json:"bootstrap,omitempty"`
	// PeerURL and ClientURL are the URLs of the machine's etcd member, set
	// when it has the control-plane role.
	PeerURL   string `json:"peerURL,omitempty"`
	ClientURL string `json:"clientURL,omitempty"`
	// Labels are the operator's labels of the machine; LabelTopology
	// names its failure domain.
	Labels map[string]string `json:"labels,omitempty"`
}

// LabelTopology is the node label naming the machine's failure domain
// (a rack, a zone): the coordinator spreads etcd voters over its values.
const LabelTopology = "topology"

// NodePhase is where a node is in its life.
type NodePhase string

// Node phases.
const (
	NodeRegistered NodePhase = "Registered" // known, no member (worker, or not yet joined)
	NodeJoining    NodePhase = "Joining"    // join requested or learner running
	NodeStandby    NodePhase = "Standby"    // ready control-plane host, not a member: the cluster has its voters
	NodeMember     NodePhase = "Member"     // its member is a voter
	NodeLeaving    NodePhase = "Leaving"    // removal under way
	NodeRemoved    NodePhase = "Removed"    // member removed and data wiped
	NodeFailed     NodePhase = "Failed"     // something it cannot fix by itself
)

// MemberState is the etcd role of a node's member.
type MemberState string

// Member states.
const (
	MemberNone    MemberState = ""
	MemberLearner MemberState = "learner"
	MemberVoter   MemberState = "voter"
)

// HasNoMember tells the phases in which a node runs no etcd member,
// whatever member its record last named: a standby waits to be added, a
// removed node's member is gone and its data wiped.
func (p NodePhase) HasNoMember() bool { return p == NodeStandby || p == NodeRemoved }

// ShownMember is the node's member as views (nicoctl get nodes, the
// status page) show it: the member ID and state, or for a standby or a
// removed node no ID and "standby" or "removed".
func (s NodeStatus) ShownMember() (MemberID, string) {
	switch s.Phase {
	case NodeStandby:
		return 0, "standby"
	case NodeRemoved:
		return 0, "removed"
	}
	return s.MemberID, string(s.MemberState)
}

// NodeStatus is what the agent observed on its machine.
type NodeStatus struct {
	Phase        NodePhase   `json:"phase"`
	MemberID     MemberID    `json:"memberID,omitempty"`
	MemberState  MemberState `json:"memberState,omitempty"`
	ClusterID    MemberID    `json:"clusterID,omitempty"`
	Lease        int64       `json:"lease,omitempty"`
	AgentVersion string      `json:"agentVersion,omitempty"`
	// EtcdVersion is the etcd server version the node's running member
	// reports (its Status), "" while none runs.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// EtcdVersionError says why the node does not run the etcd version
	// the leader wants for it (its NodeEtcdVersion), "" when it does.
	EtcdVersionError string `json:"etcdVersionError,omitempty"`
	Message          string `json:"message,omitempty"`
	// Certificate is the node certificate (PEM) the agent holds, kept
	// current on renewal: public, and what nicoctl gossip rotate-key
	// --new-secret seals the new gossip secret to.
	Certificate string `json:"certificate,omitempty"`
	// GossipAddr is the host:port others reach the node's gossip member
	// on ("" without gossip): a member that is alone and whose seeds are
	// gone rejoins the mesh through the addresses the records name.
	GossipAddr string `json:"gossipAddr,omitempty"`
	// DataDir is the file system of the node's etcd data dir as the
	// agent last measured it (nil: not measured, or no member here).
	DataDir   *DataDirStatus `json:"dataDir,omitempty"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// DataDirStatus is the free and total space of the file system holding a
// node's etcd data dir.
type DataDirStatus struct {
	FreeBytes int64 `json:"freeBytes"`
	SizeBytes int64 `json:"sizeBytes"`
	// Full: less than DataDirFullBelow is free; etcd fails its next WAL
	// segment, snapshot or database growth, and the member exits.
	Full bool `json:"full,omitempty"`
	// MeasuredAt is when the agent measured it.
	MeasuredAt time.Time `json:"measuredAt"`
}

// DataDirFullBelow is the free space under which a data dir is reported
// full: etcd preallocates each WAL segment at 64 MB.
const DataDirFullBelow int64 = 64 << 20

// NewNode returns a Node with its type filled in.
func NewNode(name string) *Node {
	return &Node{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindNode}, Metadata: ObjectMeta{Name: name}}
}

// GossipPeers returns the gossip addresses the nodes publish, sorted,
// leaving out self's and those of removed nodes.
func GossipPeers(nodes []*Node, self string) []string {
	var out []string
	for _, n := range nodes {
		if n.Metadata.Name != self && n.Status.GossipAddr != "" && n.Status.Phase != NodeRemoved {
			out = append(out, n.Status.GossipAddr)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HasRole tells whether the node has role r.
func (n *Node) HasRole(r Role) bool { return slices.Contains(n.Spec.Roles, r) }

// GetTypeMeta implements Object.
func (n *Node) GetTypeMeta() *TypeMeta { return &n.TypeMeta }

// GetMetadata implements Object.
func (n *Node) GetMetadata() *ObjectMeta { return &n.Metadata }

// MemberID is an etcd member or cluster ID. It is written as 16 hex digits,
// as etcdctl shows it, so that JSON readers do not lose precision.
type MemberID uint64

// String formats the ID as etcdctl does.
func (id MemberID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// MarshalText implements encoding.TextMarshaler.
func (id MemberID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *MemberID) UnmarshalText(b []byte) error {
	var v uint64
	if _, err := fmt.Sscanf(string(b), "%x", &v); err != nil {
		return fmt.Errorf("api: member id %q: want hex digits: %w", b, err)
	}
	*id = MemberID(v)
	return nil
}

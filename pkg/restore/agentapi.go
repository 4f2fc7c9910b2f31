package restore

import (
	"errors"

	"github.com/homystack/nico/pkg/member"
)

// The recovery API each control-plane agent serves (agent/recovery), over
// mutual TLS: only a client certificate of the fleet CA whose Common Name
// is pki.RootIdentity (the operator's, nicoctl's) may call it. Every call
// acts on that agent's own host only, needs no etcd quorum, and is
// idempotent: a resumed Runner calls it again.
const (
	// PathSurvey (GET) answers a HostState.
	PathSurvey = "/v1/recovery/survey"
	// PathPeers (GET) answers the control-plane agents the host's gossip
	// mesh knows ([]AgentPeer).
	PathPeers = "/v1/recovery/peers"
	// PathStop (POST StopRequest) stops the agent's member, holds the host
	// for the operation and fences the data dir when asked.
	PathStop = "/v1/recovery/stop"
	// PathSnapshot (PUT, the snapshot file as the body) stores a snapshot
	// for the operation; HeaderOp and HeaderSHA256 are required.
	PathSnapshot = "/v1/recovery/snapshot"
	// PathRestore (POST RestoreRequest) restores the stored snapshot
	// into the data dir as a new one-member cluster.
	PathRestore = "/v1/recovery/restore"
	// PathServe (POST ServeRequest) starts the member (ServeResponse).
	PathServe = "/v1/recovery/serve"
	// PathRejoin (POST RejoinRequest) wipes the data dir and joins the
	// cluster that serves at the given endpoints as a learner.
	PathRejoin = "/v1/recovery/rejoin"
	// PathRelease (POST ReleaseRequest) stops the member the recovery
	// serves and hands the host back to its agent.
	PathRelease = "/v1/recovery/release"
)

// Headers of a snapshot upload.
const (
	HeaderOp     = "Nico-Operation"
	HeaderSHA256 = "Nico-Snapshot-Sha256"
)

// Data dir states in a HostState.
const (
	DataAbsent = "absent" // no data dir
	DataEmpty  = "empty"  // a data dir without etcd data
	DataMember = "member" // etcd data that may be served
	DataFenced = "fenced" // superseded: never served again
)

// HostState is what an agent reports of its host for a survey: the member
// as it reports itself (etcd's Maintenance Status answers without a
// quorum), and the data dir as found on disk.
type HostState struct {
	Node      string `json:"node"`
	ClientURL string `json:"clientURL"`
	PeerURL   string `json:"peerURL"`
	DataDir   string `json:"dataDir"`
	// Data is one of DataAbsent, DataEmpty, DataMember, DataFenced.
	Data  string        `json:"data"`
	Fence *member.Fence `json:"fence,omitempty"`
	// Held names the operation that holds the host (its agent stopped),
	// "" when the agent runs it.
	Held string `json:"held,omitempty"`
	// Serving: the member answered its status.
	Serving   bool   `json:"serving"`
	MemberID  uint64 `json:"memberID,omitempty"`
	ClusterID uint64 `json:"clusterID,omitempty"`
	Applied   uint64 `json:"appliedIndex,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	Leader    uint64 `json:"leader,omitempty"`
	Learner   bool   `json:"learner,omitempty"`
	// Err is why the member did not answer.
	Err string `json:"error,omitempty"`
}

// Survivor is h as a recovery's survey lists it.
func (h HostState) Survivor() Survivor {
	return Survivor{Node: h.Node, ClientURL: h.ClientURL, MemberID: h.MemberID, Applied: h.Applied, Revision: h.Revision,
		RaftTerm: h.RaftTerm, Leader: h.Leader, Learner: h.Learner, Err: h.Err}
}

// AgentPeer is one control-plane agent of the mesh and where its recovery
// API listens.
type AgentPeer struct {
	Node string `json:"node"`
	Addr string `json:"addr"` // host:port
}

// StopRequest asks an agent to stop its member for operation Op.
type StopRequest struct {
	Op    string        `json:"op"`
	Fence *member.Fence `json:"fence,omitempty"`
}

// RestoreRequest asks an agent to restore the snapshot it stored for Op
// (whose sha256 is SHA256) as a new one-member cluster.
type RestoreRequest struct {
	Op           string `json:"op"`
	SHA256       string `json:"sha256"`
	BumpRevision uint64 `json:"bumpRevision,omitempty"`
	ClusterToken string `json:"clusterToken"`
}

// ServeRequest asks an agent to serve its member (forced into a new
// one-member cluster when Force, which needs Hold: the member serves on a
// private loopback client URL until the agent has written Hold there).
type ServeRequest struct {
	Op           string     `json:"op"`
	Force        bool       `json:"force,omitempty"`
	Hold         *FirstHold `json:"hold,omitempty"`
	ClusterToken string     `json:"clusterToken"`
}

// ServeResponse is the cluster the member serves.
type ServeResponse struct {
	ClusterID uint64 `json:"clusterID"`
}

// RejoinRequest asks an agent to wipe its data dir and join the cluster
// served at Endpoints (client URLs) as a learner, then promote it.
type RejoinRequest struct {
	Op           string   `json:"op"`
	Endpoints    []string `json:"endpoints"`
	ClusterToken string   `json:"clusterToken"`
}

// ReleaseRequest hands the host back to its agent.
type ReleaseRequest struct {
	Op string `json:"op"`
	// Unfence removes the fence Op wrote (an operation abandoned at its
	// first step: the old cluster is whole again).
	Unfence bool `json:"unfence,omitempty"`
}

// APIError is an agent's refusal as JSON.
type APIError struct {
	Error string `json:"error"`
}

// ErrAgentRefused is returned for a call an agent refused (4xx).
var ErrAgentRefused = errors.New("restore: the agent refused")

package api

import "time"

// KindNodeEtcdVersion is the kind of a node's desired etcd version.
const KindNodeEtcdVersion = "NodeEtcdVersion"

// NodeEtcdVersion is the etcd version the coordinator's leader wants one
// node's member to run, written (fenced) by the etcd version roll one node
// at a time; the node's agent restarts its member on that version's binary
// and reports the version it runs in NodeStatus.EtcdVersion (or why it
// cannot, in NodeStatus.EtcdVersionError). Its name is the node's; only
// the leader writes it.
type NodeEtcdVersion struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta          `json:"metadata"`
	Spec     NodeEtcdVersionSpec `json:"spec"`
}

// NodeEtcdVersionSpec is the desired version.
type NodeEtcdVersionSpec struct {
	// Version is the etcd version to run, as "3.7.3".
	Version string `json:"version"`
	// Since is when the leader asked for it: the step's deadline runs
	// from here.
	Since time.Time `json:"since"`
}

// NewNodeEtcdVersion returns node's desired etcd version v.
func NewNodeEtcdVersion(node, v string, since time.Time) *NodeEtcdVersion {
	return &NodeEtcdVersion{
		TypeMeta: TypeMeta{APIVersion: Version, Kind: KindNodeEtcdVersion},
		Metadata: ObjectMeta{Name: node},
		Spec:     NodeEtcdVersionSpec{Version: v, Since: since},
	}
}

// GetTypeMeta implements Object.
func (v *NodeEtcdVersion) GetTypeMeta() *TypeMeta { return &v.TypeMeta }

// GetMetadata implements Object.
func (v *NodeEtcdVersion) GetMetadata() *ObjectMeta { return &v.Metadata }

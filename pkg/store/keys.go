package store

// Key directories under the prefix. Every key nico uses is built here.
const (
	NodesDir      = "nodes/"
	HeartbeatsDir = "heartbeats/"
	JoinsDir      = "joins/"
	RemovalsDir   = "removals/"
	OpsDir        = "ops/"
	// ActiveOpKey holds the name of the one operation in flight; creating an
	// operation requires it to be absent, so two can never run at once.
	ActiveOpKey = "active-op"
	// ElectionPrefix is where coordinator candidates campaign.
	ElectionPrefix = "election/"
	// NudgeKey is what the coordinator leader writes, fenced, to give a
	// learner that got its log as a snapshot an entry to apply: etcd does
	// not let it publish itself until one is (docs/etcd-snapshot-join.md).
	// It holds the operation's name; nothing reads it.
	NudgeKey = "nudge"
	// EtcdClusterKey holds the fleet's one EtcdCluster.
	EtcdClusterKey = "etcdcluster"
	// EtcdVersionsDir holds each node's desired etcd version
	// (api.NodeEtcdVersion), written by the leader's etcd version roll.
	EtcdVersionsDir = "etcdversions/"
	// SnapshotDrillKey holds the newest restore drill's report
	// (api.SnapshotDrill), written by nicoctl snapshot verify.
	SnapshotDrillKey = "snapshot-drill"
	// ClusterLineageKey holds the fleet's earlier etcd cluster IDs
	// (api.ClusterLineage), written by nicoctl restore.
	ClusterLineageKey = "lineage"
	// ClusterIDKey holds the ID (16 hex digits) of the etcd cluster the
	// coordinators may act on. A cluster restored from a snapshot starts
	// with the old cluster's ID there, so that no leader plans on it until
	// the restore hands it over by writing the new ID (Store.Hold).
	ClusterIDKey = "cluster-id"
)

// NodeEtcdVersionKey is where the etcd version node name should run is.
func NodeEtcdVersionKey(name string) string { return EtcdVersionsDir + name }

// NodeKey is where node name is registered.
func NodeKey(name string) string { return NodesDir + name }

// HeartbeatKey is the node's lease-bound liveness key.
func HeartbeatKey(name string) string { return HeartbeatsDir + name }

// JoinKey is where node name files its join request.
func JoinKey(name string) string { return JoinsDir + name }

// RemovalKey is where the removal of node name is requested.
func RemovalKey(name string) string { return RemovalsDir + name }

// OpKey is where operation id is journaled.
func OpKey(id string) string { return OpsDir + id }

// SwitchesDir holds one api.SwitchRequest per control-plane host asking
// for the switch slot (its agent writes the spec, the leader the status).
const SwitchesDir = "switches/"

// SwitchKey is node name's switch request.
func SwitchKey(name string) string { return SwitchesDir + name }

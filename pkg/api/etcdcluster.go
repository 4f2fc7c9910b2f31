package api

import "time"

// KindEtcdCluster is the kind of the fleet's one declared etcd cluster.
const KindEtcdCluster = "EtcdCluster"

// EtcdClusterName is the name of the fleet's EtcdCluster: there is one.
const EtcdClusterName = "etcd"

// Member kinds in EtcdClusterSpec.Members.
const (
	// MemberExternal is a member nico does not run: nico adds it as a
	// learner, publishes what it must start with, promotes it once it has
	// caught up and removes it when it leaves the spec.
	MemberExternal = "external"
)

// Allowed voter counts: odd, so that every failure tolerance is paid for once.
var AllowedVoters = []int{1, 3, 5, 7}

// DefaultVoters is the voter count when the spec names none: the cluster
// grows to three voters (through two) as control-plane hosts arrive, and
// further hosts are standbys.
const DefaultVoters = 3

// EtcdCluster declares the etcd cluster: how many voters, which members nico
// does not run, the membership policy and the etcd version. People write
// spec (nicoctl apply -f); the coordinator's leader writes status.
type EtcdCluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta        `json:"metadata"`
	Spec     EtcdClusterSpec   `json:"spec"`
	Status   EtcdClusterStatus `json:"status"`
}

// EtcdClusterSpec is the desired cluster.
type EtcdClusterSpec struct {
	// Voters is the desired number of voting members: 1, 3, 5 or 7.
	// Control-plane hosts beyond it are standbys.
	// Default: 3 (DefaultVoters) in the cluster nico bootstraps; nicoctl
	// apply needs it.
	// Validation: 1, 3, 5 or 7.
	Voters int `json:"voters"`
	// Members are members nico does not run (kind external).
	// Validation: no name or URL given twice.
	Members []EtcdMemberSpec `json:"members,omitempty"`
	// Policy is the membership policy every coordinator candidate plans with.
	Policy EtcdPolicy `json:"policy"`
	// Version is the desired etcd version of the members nico runs, as
	// "3.6.16" ("": whatever each node runs; no version change is rolled).
	// Validation: a release in nico's etcd version table, as 3.6.16, or "".
	Version string `json:"version,omitempty"`
	// Snapshots is where and how often snapshots are taken
	// (etcdsnapshots.go); empty: none.
	Snapshots EtcdSnapshotsSpec `json:"snapshots,omitzero"`
	// MachinePool names the MachinePool that VMs come from when the
	// registered control-plane hosts are fewer than spec.voters: the leader's
	// etcd-machines controller writes the cluster's MachineClaim (named
	// etcd) and only that; the machine-pool controller creates and places
	// the VMs, spread over hypervisor hosts, and takes away the ones the
	// claim drops. A VM voter dead past policy.replaceDeadMembersAfter is
	// removed, then its VM destroyed and a fresh one asked for
	// (docs/machine-pools.md). "" asks no pool.
	// Validation: "" or a DNS label (a pool's name).
	MachinePool string `json:"machinePool,omitempty"`
}

// EtcdMemberSpec is one declared member that nico does not run.
type EtcdMemberSpec struct {
	// Name is the member's etcd name (--name).
	// Validation: 1 to 63 letters, digits, '.', '_' and '-', starting and
	// ending with a letter or digit.
	Name string `json:"name"`
	// Kind is MemberExternal.
	// Validation: external.
	Kind string `json:"kind"`
	// PeerURLs are the URLs the member listens on for peers.
	// Validation: at least one http or https URL with a host and port and no
	// path, as https://10.0.0.9:2380.
	PeerURLs []string `json:"peerURLs"`
	// ClientURLs are the URLs the member serves clients on.
	// Validation: at least one http or https URL with a host and port and no
	// path, as https://10.0.0.9:2379.
	ClientURLs []string `json:"clientURLs"`
}

// EtcdPolicy holds the membership knobs every coordinator candidate plans
// with; its coordinator.* settings are only the first values written at
// bootstrap.
type EtcdPolicy struct {
	// LearnerStartTimeout bounds the time from adding a learner until it starts.
	// Default: the coordinator's coordinator.learnerStartTimeout.
	// Validation: 0 or at least 1s (MinLearnerTimeout).
	LearnerStartTimeout Duration `json:"learnerStartTimeout,omitempty"`
	// LearnerProgressTimeout bounds the time a started learner may go
	// without catching up before it is removed.
	// Default: the coordinator's coordinator.learnerProgressTimeout.
	// Validation: 0 or at least 1s (MinLearnerTimeout).
	LearnerProgressTimeout Duration `json:"learnerProgressTimeout,omitempty"`
	// HealthTimeout bounds each status call to one member.
	// Default: the coordinator's coordinator.healthTimeout.
	// Validation: 0, or from 100ms to 30s (MinHealthTimeout,
	// MaxHealthTimeout).
	HealthTimeout Duration `json:"healthTimeout,omitempty"`
	// ReplaceDeadMembersAfter replaces a voter whose node has been dead this
	// long with a standby, if quorum allows; zero never does.
	// Default: 0, never.
	// Validation: 0 or at least 10s (MinReplaceDeadMembersAfter).
	ReplaceDeadMembersAfter Duration `json:"replaceDeadMembersAfter,omitempty"`
	// RecoverWithoutConfirmation lets nicoctl recover go on after a quorum
	// loss without --yes or a prompt (docs/disaster-recovery.md); nothing
	// recovers by itself either way.
	RecoverWithoutConfirmation bool `json:"recoverWithoutConfirmation,omitempty"`
	// DefragFragmentation defragments a member once (db size - in use) /
	// db size reaches it, one member at a time, leader last; zero never does.
	// Default: 0, never.
	// Validation: 0 or more and below 1, as 0.5.
	DefragFragmentation float64 `json:"defragFragmentation,omitempty"`
	// VersionStepTimeout bounds one member's etcd version change (from
	// the leader asking until it serves the version, healthy) before the
	// version roll halts; zero is 5 minutes.
	// Default: 5m.
	VersionStepTimeout Duration `json:"versionStepTimeout,omitempty"`
	// DefragMinDBSize skips defragmentation of members whose database is
	// smaller than this many bytes (fragmentation of a small file is cheap).
	// Validation: 0 or more.
	DefragMinDBSize int64 `json:"defragMinDBSize,omitempty"`
	// CompactionRetention is the age of the history nico keeps in its
	// etcd: the leader compacts to the newest revision it saw at least
	// this long ago (etcdcompaction.go); zero is 1 hour.
	// Default: 1h.
	// Validation: 0 or at least 1m (MinCompactionRetention); 0 while
	// compactionDisabled is true.
	CompactionRetention Duration `json:"compactionRetention,omitempty"`
	// CompactionMinRevisions also keeps at least this many of the newest
	// revisions; zero keeps none beyond the retention.
	// Validation: 0 or more; 0 while compactionDisabled is true.
	CompactionMinRevisions int64 `json:"compactionMinRevisions,omitempty"`
	// CompactionDisabled turns nico's compaction of its etcd off, for
	// operators who compact it by other means (etcd's own
	// --auto-compaction-retention, a job of their own); the retention and
	// minimum are then left unset. Nothing compacts nico's etcd otherwise:
	// with it set and nothing else compacting, the database grows until
	// the quota.
	CompactionDisabled bool `json:"compactionDisabled,omitempty"`
	// QuotaBackendBytes is each member's database quota (etcd's
	// --quota-backend-bytes): past it etcd raises NOSPACE and refuses
	// writes. Zero is etcd's default, DefaultQuotaBackendBytes. A member
	// takes a new value at its next start (docs/faults.md, "NOSPACE").
	// Default: etcd's own, 2 GiB (DefaultQuotaBackendBytes).
	// Validation: 0, or from 1 MiB to 8 GiB (MinQuotaBackendBytes,
	// MaxQuotaBackendBytes).
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
}

// Bounds of EtcdPolicy.QuotaBackendBytes.
const (
	// DefaultQuotaBackendBytes is etcd's own default quota, 2 GiB.
	DefaultQuotaBackendBytes int64 = 2 << 30
	// MinQuotaBackendBytes is the smallest quota accepted, 1 MiB.
	MinQuotaBackendBytes int64 = 1 << 20
	// MaxQuotaBackendBytes is the largest accepted, 8 GiB: etcd's
	// documented upper bound (it warns beyond it).
	MaxQuotaBackendBytes int64 = 8 << 30
)

// Member roles in EtcdMemberStatus.Role.
const (
	RoleVoter    = "voter"
	RoleLearner  = "learner"
	RoleStandby  = "standby"
	RoleExternal = "external"
)

// EtcdClusterStatus is the leader's view of the cluster.
type EtcdClusterStatus struct {
	// ObservedRevision is the store revision of the spec this status
	// answers to.
	ObservedRevision int64 `json:"observedRevision,omitempty"`
	// Members lists every member and standby, by name.
	Members []EtcdMemberStatus `json:"members,omitempty"`
	// Leader is the name of the etcd leader.
	Leader string `json:"leader,omitempty"`
	// ClusterVersion is etcd's cluster version (major.minor.0).
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// Voters is how many voting members there are.
	Voters int `json:"voters"`
	// FaultTolerance is how many voters the cluster can lose and keep quorum.
	FaultTolerance int `json:"faultTolerance"`
	// Alarms are etcd's active alarms, as "NOSPACE on cp-1".
	Alarms []string `json:"alarms,omitempty"`
	// External holds, for each external member in flight, the values it
	// must start with.
	External []ExternalMemberStart `json:"external,omitempty"`
	// Snapshots is the last snapshot, failure and verified restore
	// (etcdsnapshots.go).
	Snapshots EtcdSnapshotsStatus `json:"snapshots,omitzero"`
	// Compaction is the last compaction of nico's etcd (etcdcompaction.go).
	Compaction EtcdCompactionStatus `json:"compaction,omitzero"`
	// NoSpace is the last NOSPACE episode: while the alarm is raised etcd
	// refuses every write, this status's included, so it is written once
	// nico has reclaimed the space and disarmed the alarm (metrics and
	// logs tell meanwhile; docs/faults.md, "NOSPACE").
	NoSpace *NoSpaceEpisode `json:"noSpace,omitempty"`
	// Conditions: Healthy, Reconciled, VersionSkew.
	Conditions []Condition `json:"conditions,omitempty"`
	UpdatedAt  time.Time   `json:"updatedAt,omitempty"`
}

// EtcdMemberStatus is one member or standby as the leader last saw it.
type EtcdMemberStatus struct {
	Name string `json:"name"`
	// Node is the registered node the member runs on ("" for external ones).
	Node string   `json:"node,omitempty"`
	ID   MemberID `json:"id,omitempty"`
	// Role is RoleVoter, RoleLearner, RoleStandby or RoleExternal.
	Role    string `json:"role"`
	Healthy bool   `json:"healthy"`
	Leader  bool   `json:"leader,omitempty"`
	// Version is the etcd server version the member reports.
	Version      string `json:"version,omitempty"`
	RaftTerm     uint64 `json:"raftTerm,omitempty"`
	RaftIndex    uint64 `json:"raftIndex,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	DBSize       int64  `json:"dbSize,omitempty"`
	DBSizeInUse  int64  `json:"dbSizeInUse,omitempty"`
	// DBSizeQuota is the quota the member runs with (its Status): past it
	// etcd raises NOSPACE.
	DBSizeQuota int64 `json:"dbSizeQuota,omitempty"`
	// Progress is a learner's raft index as a fraction of the leader's
	// (0..1), and ETA the time left at the observed catch-up rate.
	Progress float64  `json:"progress,omitempty"`
	ETA      Duration `json:"eta,omitempty"`
	Alarms   []string `json:"alarms,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// NoSpaceEpisode is one time etcd raised NOSPACE, from the leader's
// first sight of it to its disarm.
type NoSpaceEpisode struct {
	// Members are the members that raised it.
	Members []string `json:"members"`
	// SeenAt is when the leader first saw the alarm.
	SeenAt time.Time `json:"seenAt"`
	// DBSize and DBSizeQuota are the largest alarmed member's database
	// size and quota when it was seen; DBSizeAfter its size at the disarm.
	DBSize      int64 `json:"dbSize,omitempty"`
	DBSizeQuota int64 `json:"dbSizeQuota,omitempty"`
	DBSizeAfter int64 `json:"dbSizeAfter,omitempty"`
	// CompactedAt is the revision nico compacted the history at.
	CompactedAt int64 `json:"compactedAt,omitempty"`
	// DisarmedAt is when the last of its alarms was disarmed.
	DisarmedAt time.Time `json:"disarmedAt,omitzero"`
}

// ExternalMemberStart is what an external member must start etcd with.
type ExternalMemberStart struct {
	Name string `json:"name"`
	// InitialCluster is the --initial-cluster value.
	InitialCluster string `json:"initialCluster"`
	// InitialClusterState is "existing".
	InitialClusterState string `json:"initialClusterState"`
}

// EtcdCluster condition types.
const (
	CondHealthy     = "Healthy"
	CondReconciled  = "Reconciled"
	CondVersionSkew = "VersionSkew"
)

// NewEtcdCluster returns the fleet's EtcdCluster with the default voters.
func NewEtcdCluster() *EtcdCluster {
	return &EtcdCluster{
		TypeMeta: TypeMeta{APIVersion: Version, Kind: KindEtcdCluster},
		Metadata: ObjectMeta{Name: EtcdClusterName},
		Spec:     EtcdClusterSpec{Voters: DefaultVoters},
	}
}

// GetTypeMeta implements Object.
func (c *EtcdCluster) GetTypeMeta() *TypeMeta { return &c.TypeMeta }

// GetMetadata implements Object.
func (c *EtcdCluster) GetMetadata() *ObjectMeta { return &c.Metadata }

// OpDefrag is the operation type that holds the one-change-in-flight slot
// while one member is defragmented, so that no membership change or
// rollout step runs beside it.
const OpDefrag OpType = "Defrag"

// StepDefragment is an OpDefrag operation's one step: the member's
// Defragment call.
const StepDefragment OpStep = "Defragment"

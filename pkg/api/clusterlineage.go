package api

import (
	"slices"
	"time"
)

// KindClusterLineage is the kind of the fleet's one ClusterLineage.
const KindClusterLineage = "ClusterLineage"

// ClusterLineageName is the name of the one ClusterLineage.
const ClusterLineageName = "fleet"

// ClusterLineage lists the etcd clusters this fleet ran before the one
// that holds it: a restore starts a new cluster (a new cluster ID), and
// snapshots of the earlier ones stay snapshots of this fleet. Written by
// nicoctl restore into the new cluster (its one writer), carried by every
// snapshot into the next restore; snapshot verify and restore accept a
// snapshot whose cluster is the current one or one of these.
type ClusterLineage struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta           `json:"metadata"`
	Status   ClusterLineageStatus `json:"status"`
}

// ClusterLineageStatus is the lineage itself.
type ClusterLineageStatus struct {
	// Earlier are the fleet's earlier etcd clusters, oldest first.
	Earlier []EarlierCluster `json:"earlier,omitempty"`
}

// EarlierCluster is one etcd cluster the fleet ran before.
type EarlierCluster struct {
	ClusterID MemberID `json:"clusterID"`
	// ReplacedAt is when the restore that replaced it (or a later one
	// that learned of it) recorded it; By names that restore.
	ReplacedAt time.Time `json:"replacedAt,omitzero"`
	By         string    `json:"by,omitempty"`
}

// NewClusterLineage returns the lineage holding earlier.
func NewClusterLineage(earlier []EarlierCluster) *ClusterLineage {
	return &ClusterLineage{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindClusterLineage},
		Metadata: ObjectMeta{Name: ClusterLineageName}, Status: ClusterLineageStatus{Earlier: earlier}}
}

// IDs are the earlier clusters' IDs, oldest first.
func (l *ClusterLineage) IDs() []MemberID {
	out := make([]MemberID, 0, len(l.Status.Earlier))
	for _, e := range l.Status.Earlier {
		out = append(out, e.ClusterID)
	}
	return out
}

// Has tells whether id is one of the earlier clusters.
func (l *ClusterLineage) Has(id MemberID) bool { return slices.Contains(l.IDs(), id) }

// GetTypeMeta implements Object.
func (l *ClusterLineage) GetTypeMeta() *TypeMeta { return &l.TypeMeta }

// GetMetadata implements Object.
func (l *ClusterLineage) GetMetadata() *ObjectMeta { return &l.Metadata }

package snapshot

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Reasons a snapshot was taken, in Meta.Reason.
const (
	ReasonScheduled = "scheduled"
	ReasonOnDemand  = "on-demand"
	// ReasonBeforeOp prefixes the reason of a snapshot taken before a
	// membership change or rollout step: "before-op <op name>".
	ReasonBeforeOp = "before-op"
)

// Meta describes one stored snapshot; it is stored beside the snapshot as
// name.json and written last, so a snapshot without it is incomplete and
// not listed.
type Meta struct {
	// Name is the snapshot's name in its store (no extension).
	Name string `json:"name"`
	// ClusterID is the etcd cluster the snapshot was taken from.
	ClusterID api.MemberID `json:"clusterID"`
	// MemberID and MemberName are the member that streamed it.
	MemberID   api.MemberID `json:"memberID"`
	MemberName string       `json:"memberName,omitempty"`
	// Node is the nico node that member runs on, when known.
	Node string `json:"node,omitempty"`
	// EtcdVersion is the version of the etcd server that created it.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// TakenAt is when the stream started (UTC).
	TakenAt time.Time `json:"takenAt"`
	// Reason is ReasonScheduled, ReasonOnDemand or "before-op <op>".
	Reason string `json:"reason,omitempty"`
	// Unsynced, when set, says why the member could not be brought up to
	// its cluster's acknowledged writes before the snapshot (no quorum):
	// the snapshot is that member's own state.
	Unsynced string `json:"unsynced,omitempty"`
	// Status is what Check read from the file.
	Status
}

// Status is what Check reads from a snapshot file.
type Status struct {
	// SHA256 is the hex sha256 of the database, as etcd appended it.
	SHA256 string `json:"sha256"`
	// Size is the whole file's size in bytes, trailer included.
	Size int64 `json:"size"`
	// Revision is the newest revision in the database.
	Revision int64 `json:"revision"`
	// TotalKeys is how many live keys the database holds.
	TotalKeys int `json:"totalKeys"`
	// Hash is etcd's crc32 of the database's buckets (etcdutl's "hash").
	Hash uint32 `json:"hash"`
	// StorageVersion is the database's storage version ("" before 3.6).
	StorageVersion string `json:"storageVersion,omitempty"`
}

// Package errors, checked with errors.Is.
var (
	// ErrNotFound: the store holds no snapshot of that name.
	ErrNotFound = errors.New("snapshot: not found")
	// ErrCorrupt: the file is truncated, its sha256 does not match, or
	// its database does not pass the integrity check.
	ErrCorrupt = errors.New("snapshot: corrupt")
	// ErrOtherCluster: the snapshot was taken from another etcd cluster
	// than the one it is checked against.
	ErrOtherCluster = errors.New("snapshot: from another cluster")
	// ErrMismatch: a restored snapshot serves other keys or another
	// revision than its file holds (the drill ran, and failed).
	ErrMismatch = errors.New("snapshot: restored member does not match the file")
	// ErrBadName: a name that is not a snapshot name.
	ErrBadName = errors.New("snapshot: bad name")
)

// nameRE is what a snapshot name may be: it becomes a file and an object
// name, so no slashes, spaces or dots.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ValidName returns an error naming name and what is accepted when name
// cannot be a snapshot's name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q: use 1 to 128 letters, digits, '-' or '_', starting with a letter or digit", ErrBadName, name)
	}
	return nil
}

// NameFor is the name a snapshot of cluster taken at t gets:
// etcd-<cluster id>-<UTC time>-r<revision>, sorting by time within a
// cluster.
func NameFor(cluster api.MemberID, t time.Time, revision int64) string {
	ts := strings.ReplaceAll(t.UTC().Format("20060102T150405.000Z"), ".", "-")
	return fmt.Sprintf("etcd-%s-%s-r%d", cluster, ts, revision)
}

// CheckCluster returns ErrOtherCluster, naming the IDs, when m was taken
// from another cluster than want or the earlier clusters of its fleet
// (api.ClusterLineage: the clusters a restore replaced); a zero want
// accepts any.
func (m Meta) CheckCluster(want api.MemberID, earlier ...api.MemberID) error {
	if want == 0 || m.ClusterID == want || slices.Contains(earlier, m.ClusterID) {
		return nil
	}
	if len(earlier) > 0 {
		return fmt.Errorf("%w: snapshot %s was taken from cluster %s, this cluster is %s and its fleet ran before as %v; use a snapshot of one of those", ErrOtherCluster, m.Name, m.ClusterID, want, earlier)
	}
	return fmt.Errorf("%w: snapshot %s was taken from cluster %s, this cluster is %s; use a snapshot of cluster %s", ErrOtherCluster, m.Name, m.ClusterID, want, want)
}

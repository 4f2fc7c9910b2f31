package objectapply

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Which manifest the fleet's objects follow. Every control-plane host
// carries the manifest of its own NixOS generation, and during a rollout
// they differ. Manifests are ordered by the flake's commit time
// (spec.lastModified), then by revision (as strings): a total order every
// host computes alike, so that the newest commit wins whichever host
// applies last, and no two hosts undo each other's apply.
//
//	manifest vs record (the one applied last)
//	  no record ........................ apply
//	  orders after ..................... apply
//	  orders before .................... skip: superseded (not an error)
//	  same order, same objects ......... apply (writes back drift; idempotent)
//	  same order, other objects:
//	    the record's host is this one .. apply (the same host, rebuilt)
//	    another host ................... refuse: two hosts declare the
//	                                     same revision differently

// Verdict is what Decide says of a manifest.
type Verdict int

const (
	// Apply: the manifest is the fleet's; write its objects.
	Apply Verdict = iota
	// Superseded: a manifest that orders after it was applied; write
	// nothing, and do not fail.
	Superseded
	// Conflict: another host applied other objects under the same order;
	// write nothing, and fail.
	Conflict
)

// Decision is Decide's answer.
type Decision struct {
	Verdict Verdict
	// Reason says why, for the log and the refusal.
	Reason string
}

// Decide says whether manifest m, applied by host, may replace what the
// record of the last applied manifest says (nil: none). m's
// Status.Digest identifies its objects. It is pure.
func Decide(record, m *api.FlakeObjects, host string) Decision {
	if record == nil {
		return Decision{Apply, "no manifest was applied before"}
	}
	this, last := describe(m.Spec), describe(record.Spec)
	switch c := CompareOrder(m.Spec, record.Spec); {
	case c > 0:
		return Decision{Apply, fmt.Sprintf("%s orders after %s, applied by %s", this, last, record.Status.Host)}
	case c < 0:
		return Decision{Superseded, fmt.Sprintf("this host's %s orders before %s, applied by %s at %s; the fleet keeps the newer one (docs/declared-objects.md)",
			this, last, record.Status.Host, record.Status.AppliedAt.UTC().Format("2006-01-02T15:04:05Z"))}
	case m.Status.Digest == record.Status.Digest:
		return Decision{Apply, this + " is the one applied"}
	case record.Status.Host == host:
		return Decision{Apply, this + " was applied by this host with other objects; this host's build replaces it"}
	default:
		return Decision{Conflict, fmt.Sprintf("%s was applied by %s with other objects than this host declares: every control-plane host must declare the same objects for one revision; make them agree, or commit the change (a new revision orders after it)",
			this, record.Status.Host)}
	}
}

// CompareOrder orders two manifests: by lastModified, then revision.
func CompareOrder(a, b api.FlakeObjectsSpec) int {
	return cmp.Or(cmp.Compare(a.LastModified, b.LastModified), strings.Compare(a.Revision, b.Revision))
}

func describe(s api.FlakeObjectsSpec) string {
	return fmt.Sprintf("manifest of revision %s (lastModified %d)", s.Revision, s.LastModified)
}

// Removal is what becomes of an object the flake no longer declares.
type Removal int

const (
	// Delete deletes the object (a MachinePool).
	Delete Removal = iota
	// Release keeps the object and its spec and drops the flake's mark
	// (the EtcdCluster, which the fleet always has; a KubernetesCluster
	// under the orphan policy).
	Release
	// MarkDeletion releases a KubernetesCluster and marks it for
	// deletion (the delete policy): its controller releases its machines
	// and deletes it.
	MarkDeletion
)

// RemovalOf says what becomes of an object of kind the flake declared
// and no longer does, under the manifest's KubernetesClusterRemoval
// policy. It is pure.
func RemovalOf(kind, clusterPolicy string) Removal {
	switch kind {
	case api.KindMachinePool:
		return Delete
	case api.KindKubernetesCluster:
		if clusterPolicy == api.ClusterRemovalDelete {
			return MarkDeletion
		}
		return Release
	default:
		return Release
	}
}

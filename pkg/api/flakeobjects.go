package api

import (
	"encoding/json"
	"time"
)

// KindFlakeObjects is the kind of the fleet's objects declared in the
// flake: the header document of the manifest the NixOS module renders,
// and the record of the one applied last.
const KindFlakeObjects = "FlakeObjects"

// FlakeObjectsName is the name of the one FlakeObjects record.
const FlakeObjectsName = "flake"

// Removal policies of a KubernetesCluster that leaves the flake.
const (
	// ClusterRemovalOrphan leaves a KubernetesCluster removed from the
	// flake running: it is no longer the flake's (nicoctl delete then
	// needs no --force).
	ClusterRemovalOrphan = "orphan"
	// ClusterRemovalDelete marks a KubernetesCluster removed from the
	// flake for deletion, as nicoctl delete cluster does.
	ClusterRemovalDelete = "delete"
)

// FlakeObjects is the fleet's EtcdCluster, MachinePools and
// KubernetesClusters as the flake declares them (services.nico.objects,
// docs/declared-objects.md). In a manifest it is the first document, the
// objects follow; in the store it records the manifest applied last, by
// which host, with each object's spec as the flake gave it, so that a
// host carrying an older manifest does not apply it and drift shows.
type FlakeObjects struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta         `json:"metadata"`
	Spec     FlakeObjectsSpec   `json:"spec"`
	Status   FlakeObjectsStatus `json:"status"`
}

// FlakeObjectsSpec says where a manifest comes from and orders it among
// the manifests the fleet's hosts carry.
type FlakeObjectsSpec struct {
	// Revision is the flake's revision (self.rev, or self.dirtyRev).
	// Validation: not empty.
	Revision string `json:"revision"`
	// LastModified is the flake's commit time (self.lastModified, Unix
	// seconds): manifests are ordered by it, then by revision; a host
	// never applies a manifest that orders before the one applied.
	// Validation: 0 or more.
	LastModified int64 `json:"lastModified"`
	// KubernetesClusterRemoval is what becomes of a KubernetesCluster the
	// flake no longer declares: orphan (it keeps running, no longer the
	// flake's) or delete (marked for deletion).
	// Default: orphan.
	// Validation: orphan or delete.
	KubernetesClusterRemoval string `json:"kubernetesClusterRemoval,omitempty"`
}

// FlakeObjectsStatus is what the agent that applied the manifest recorded.
type FlakeObjectsStatus struct {
	// Host is the machine whose agent applied it.
	Host string `json:"host,omitempty"`
	// AppliedAt is when.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Digest is the SHA-256 of the manifest's objects, as applied.
	Digest string `json:"digest,omitempty"`
	// Objects are the objects the flake declares, each with its spec as
	// the flake gave it.
	Objects []DeclaredObject `json:"objects,omitempty"`
}

// DeclaredObject is one object of an applied manifest.
type DeclaredObject struct {
	Kind string          `json:"kind"`
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Declaration marks an object as the flake's.
type Declaration struct {
	// Revision is the flake revision whose manifest wrote the spec.
	Revision string `json:"revision"`
	// Host is the machine whose agent applied it.
	Host string `json:"host"`
}

// NewFlakeObjects returns the FlakeObjects record.
func NewFlakeObjects() *FlakeObjects {
	return &FlakeObjects{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindFlakeObjects}, Metadata: ObjectMeta{Name: FlakeObjectsName}}
}

// GetTypeMeta implements Object.
func (f *FlakeObjects) GetTypeMeta() *TypeMeta { return &f.TypeMeta }

// GetMetadata implements Object.
func (f *FlakeObjects) GetMetadata() *ObjectMeta { return &f.Metadata }

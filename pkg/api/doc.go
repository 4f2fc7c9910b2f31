// Package api defines nico's versioned objects: what is stored under the
// keyspace prefix, as JSON with apiVersion, kind, metadata, spec and status.
//
// spec is written by people or by the coordinator's leader, status by the
// observer. An object's key follows from its kind and name (store.KeyOf);
// keys are built by the store package, never by hand.
//
// # apiVersion
//
// Every kind is in one group, nico.homystack.io (Group). The kinds the
// fleet has run on since its first release (Node, Machine, MachinePool,
// EtcdCluster, Rollout, NixosConfiguration and the rest) are
// nico.homystack.io/v1 (Version). KubernetesCluster is
// nico.homystack.io/v1alpha1 (ClusterAPIVersion): its spec still changes
// shape between releases, and calling it v1 would promise a stability it
// does not have.
//
// The group nico.homystack.com (DeprecatedGroup) is read too, with the
// same version, as a deprecated spelling: nicoctl apply accepts it with a
// warning naming the field, the value and what to write instead, and the
// store reads objects already stored with it (and owner references naming
// it) as the current apiVersion, so they are rewritten with it when next
// written. Any other apiVersion is refused (CheckAPIVersion).
package api

import "time"

// Kinds of objects.
const (
	KindNode          = "Node"
	KindJoinRequest   = "JoinRequest"
	KindRemoveRequest = "RemoveRequest"
	KindOperation     = "Operation"
)

// TypeMeta names the schema of an object.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta is common to every object.
type ObjectMeta struct {
	// Validation: by kind: a KubernetesCluster's 1 to 40 lower-case letters,
	// digits and '-', starting and ending with a letter or digit
	// (MaxClusterNameLen); a MachinePool's a DNS label; the EtcdCluster's
	// etcd (its default). A KubernetesCluster being deleted is not applied
	// again until it is gone.
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// Generation counts the changes of spec, for the kinds that track it
	// (KubernetesCluster): whoever writes a new spec bumps it, and the
	// controller's status.observedGeneration answers it.
	// Default: 1 at creation; nicoctl apply counts it.
	// Validation: left out in nicoctl apply.
	Generation int64 `json:"generation,omitempty"`
	// DeletionTimestamp marks an object for deletion, for the kinds whose
	// controller releases what they hold first (KubernetesCluster): the
	// controller deletes the object once done.
	DeletionTimestamp *time.Time `json:"deletionTimestamp,omitempty"`
	// OwnerReferences name the objects this one was made for.
	OwnerReferences []OwnerReference `json:"ownerReferences,omitempty"`
	// Declared marks an object the flake declares (FlakeObjects): its spec
	// is the flake's, and nicoctl apply and delete refuse to change it
	// without --force.
	// Validation: written by the agent that applies the flake's objects;
	// left out in nicoctl apply.
	Declared *Declaration `json:"declared,omitempty"`
	// Revision is the etcd mod revision the object was read at. It is filled
	// by the store on read and used for compare-and-swap; it is not stored.
	Revision int64 `json:"-"`
}

// OwnerReference names an object's owner.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Object is implemented by every stored kind.
type Object interface {
	GetTypeMeta() *TypeMeta
	GetMetadata() *ObjectMeta
}

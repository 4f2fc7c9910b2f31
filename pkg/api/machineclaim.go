package api

import (
	"fmt"
	"time"
)

// KindMachineClaim is the kind of one declared cluster's ask for machines
// from a machine pool.
const KindMachineClaim = "MachineClaim"

// MachineClaim is what one declared cluster (the EtcdCluster, or one plane
// of a KubernetesCluster) asks of a MachinePool: the machines it wants, by
// name. It keeps the one-writer rule: the claimant's controller writes
// spec, and only it (the pool's own spec.count stays the operator's); the
// machine-pool controller reads every claim of a pool beside the pool's
// count, creates, places and takes away the claimed machines, and writes
// status. Deleting the claim takes its machines away, and no others.
//
// Its name says whose it is: EtcdClaimName for the EtcdCluster,
// "<cluster>-controlplane" and "<cluster>-dataplane" for a
// KubernetesCluster's planes (KubernetesPlaneClaimName).
type MachineClaim struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta         `json:"metadata"`
	Spec     MachineClaimSpec   `json:"spec"`
	Status   MachineClaimStatus `json:"status"`
}

// MachineClaimSpec is the claimant's ask.
type MachineClaimSpec struct {
	// Pool is the MachinePool the machines come from.
	// Validation: a DNS label (a pool's name).
	Pool string `json:"pool"`
	// Machines are the machines wanted, by name (each a DNS label, as
	// ClaimMachineName makes them): the pool creates those it lacks, and
	// takes away (its node removed first, then its domain and disk) a
	// machine of this claim no longer listed.
	Machines []string `json:"machines,omitempty"`
	// NextOrdinal is the ordinal of the next machine name: names are never
	// reused, so a fresh machine never meets records of an earlier one.
	NextOrdinal int `json:"nextOrdinal,omitempty"`
	// Roles are handed to the claimed machines at first boot, in place of
	// the pool template's.
	Roles []Role `json:"roles,omitempty"`
	// SpreadWith are the claimant's members that are not machines of this
	// claim (say, a bare-metal etcd voter): their failure domains count
	// when the claim's machines are placed.
	SpreadWith []string `json:"spreadWith,omitempty"`
	// Quorum says that the claimed machines and SpreadWith form a quorum
	// (etcd voters): the pool reports in the Spread condition when one
	// hypervisor host or topology domain holds so many of them that losing
	// it would lose quorum.
	Quorum bool `json:"quorum,omitempty"`
}

// MachineClaimStatus is the machine-pool controller's view of the claim.
type MachineClaimStatus struct {
	// Machines are the claim's machines, listed or still being taken away,
	// and where they are.
	Machines []ClaimedMachine `json:"machines,omitempty"`
	// Conditions: Spread (false when losing one host or domain would lose
	// quorum, or no host can take a machine).
	Conditions []Condition `json:"conditions,omitempty"`
	UpdatedAt  time.Time   `json:"updatedAt,omitempty"`
}

// ClaimedMachine is one machine of a claim as the pool placed it.
type ClaimedMachine struct {
	Name string `json:"name"`
	// Host is the hypervisor host it runs on ("" while Pending).
	Host string `json:"host,omitempty"`
	// Domain is the failure domain: the host's topology label, else the
	// host.
	Domain string       `json:"domain,omitempty"`
	Phase  MachinePhase `json:"phase,omitempty"`
	// Released: no longer listed, being taken away.
	Released bool `json:"released,omitempty"`
}

// CondSpread is the MachineClaim condition on its machines' spread.
const CondSpread = "Spread"

// EtcdClaimName is the name of the EtcdCluster's MachineClaim.
const EtcdClaimName = "etcd"

// Plane names in claim names.
const (
	PlaneControl = "controlplane"
	PlaneData    = "dataplane"
)

// KubernetesPlaneClaimName is the name of the MachineClaim of plane
// (PlaneControl or PlaneData) of the KubernetesCluster named cluster.
func KubernetesPlaneClaimName(cluster, plane string) string { return cluster + "-" + plane }

// ClaimMachineName is the name of the machine of claim with ordinal n
// drawn from pool: "<pool>-<claim>-<n>", never a pool's own "<pool>-<n>".
func ClaimMachineName(pool, claim string, n int) string {
	return fmt.Sprintf("%s-%s-%d", pool, claim, n)
}

// NewMachineClaim returns a MachineClaim named name.
func NewMachineClaim(name string) *MachineClaim {
	return &MachineClaim{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindMachineClaim}, Metadata: ObjectMeta{Name: name}}
}

// GetTypeMeta implements Object.
func (c *MachineClaim) GetTypeMeta() *TypeMeta { return &c.TypeMeta }

// GetMetadata implements Object.
func (c *MachineClaim) GetMetadata() *ObjectMeta { return &c.Metadata }

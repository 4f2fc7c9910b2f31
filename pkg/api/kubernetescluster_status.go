package api

import "time"

// ClusterPhase is where a KubernetesCluster is.
//
//	(created) --> Provisioning --(every condition true)--> Ready
//	                 |   ^                                  |
//	                 |   +------(a condition turns false)---+
//	                 v
//	              Failed (a named machine does not exist, ...)
//
//	(any phase) --deletionTimestamp--> Deleting --(released)--> (gone)
type ClusterPhase string

// Cluster phases.
const (
	ClusterProvisioning ClusterPhase = "Provisioning"
	ClusterReady        ClusterPhase = "Ready"
	ClusterFailed       ClusterPhase = "Failed"
	ClusterDeleting     ClusterPhase = "Deleting"
)

// KubernetesCluster condition types, in dependency order.
const (
	CondEtcdReady              = "EtcdReady"
	CondAPIServerReady         = "APIServerReady"
	CondControllerManagerReady = "ControllerManagerReady"
	CondSchedulerReady         = "SchedulerReady"
	CondControlPlaneReady      = "ControlPlaneReady"
	CondDataPlaneReady         = "DataPlaneReady"
)

// ClusterConditionTypes are the condition types of a KubernetesCluster in
// the order they become true.
var ClusterConditionTypes = []string{
	CondEtcdReady, CondAPIServerReady, CondControllerManagerReady,
	CondSchedulerReady, CondControlPlaneReady, CondDataPlaneReady,
}

// Reasons of cluster conditions and phases.
const (
	// ReasonWaitingForMachines: fewer matching free machines than count.
	ReasonWaitingForMachines = "WaitingForMachines"
	// ReasonMachineNotFound: a named machine does not exist.
	ReasonMachineNotFound = "MachineNotFound"
)

// Component names in KubernetesClusterStatus.Components.
const (
	ComponentEtcd              = "etcd"
	ComponentAPIServer         = "kube-apiserver"
	ComponentControllerManager = "kube-controller-manager"
	ComponentScheduler         = "kube-scheduler"
)

// KubernetesClusterStatus is the one place to read the whole cluster.
type KubernetesClusterStatus struct {
	Phase ClusterPhase `json:"phase,omitempty"`
	// ObservedGeneration is the metadata.generation this status answers.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ControlPlane and DataPlane count each plane's machines.
	ControlPlane ReplicaStatus `json:"controlPlane"`
	DataPlane    ReplicaStatus `json:"dataPlane"`
	// Components are, per control-plane component, how many replicas are
	// ready on which machines.
	Components []ComponentStatus `json:"components,omitempty"`
	// KubeconfigSecret names the secret with the admin kubeconfig (key
	// "value"), once written.
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`
	// ControlPlaneEndpoint is the endpoint in use (the spec's, or the
	// default the controller chose).
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint,omitempty"`
	// Version is the Kubernetes version every machine has applied ("" until
	// the first full roll).
	Version string `json:"version,omitempty"`
	// Rollout names the cluster's Rollout.
	Rollout    string             `json:"rollout,omitempty"`
	Conditions []ClusterCondition `json:"conditions,omitempty"`
	Message    string             `json:"message,omitempty"`
	UpdatedAt  time.Time          `json:"updatedAt,omitzero"`
}

// ReplicaStatus counts replicas of a plane or a component.
type ReplicaStatus struct {
	Ready int `json:"ready"`
	Total int `json:"total"`
	// ReadyMachines name the ready ones, sorted.
	ReadyMachines []string `json:"readyMachines,omitempty"`
	// Machines name all of them (the machines the cluster holds), sorted.
	Machines []string `json:"machines,omitempty"`
}

// ComponentStatus is one control-plane component across its machines.
type ComponentStatus struct {
	// Name is ComponentEtcd, ComponentAPIServer, ... .
	Name          string `json:"name"`
	ReplicaStatus `json:",inline"`
	// Leader is the machine holding the component's leader lease.
	Leader  string `json:"leader,omitempty"`
	Message string `json:"message,omitempty"`
}

// ConditionStatus is a Kubernetes condition's status.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// ClusterCondition is a Kubernetes-style condition, with the field names
// users of KubernetesCluster read (status "True"/"False"/"Unknown",
// lastTransitionTime); other nico objects use Condition.
type ClusterCondition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime,omitzero"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
}

// SetClusterCondition sets c in conds as SetCondition does: the
// transition time is kept while the status does not change. It returns the
// new slice and whether anything changed.
func SetClusterCondition(conds []ClusterCondition, c ClusterCondition) ([]ClusterCondition, bool) {
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		old := conds[i]
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		if old == c {
			return conds, false
		}
		out := append([]ClusterCondition(nil), conds...)
		out[i] = c
		return out, true
	}
	return append(append([]ClusterCondition(nil), conds...), c), true
}

// FindClusterCondition returns the condition of type t, or nil.
func FindClusterCondition(conds []ClusterCondition, t string) *ClusterCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// NewKubernetesCluster returns a KubernetesCluster named name at
// generation 1.
func NewKubernetesCluster(name string) *KubernetesCluster {
	return &KubernetesCluster{
		TypeMeta: TypeMeta{APIVersion: ClusterAPIVersion, Kind: KindKubernetesCluster},
		Metadata: ObjectMeta{Name: name, Generation: 1},
	}
}

// GetTypeMeta implements Object.
func (c *KubernetesCluster) GetTypeMeta() *TypeMeta { return &c.TypeMeta }

// GetMetadata implements Object.
func (c *KubernetesCluster) GetMetadata() *ObjectMeta { return &c.Metadata }

// Deleting tells whether the cluster is marked for deletion.
func (c *KubernetesCluster) Deleting() bool { return c.Metadata.DeletionTimestamp != nil }

// KubeconfigSecretName is the name of the secret with cluster's admin
// kubeconfig (Cluster API's name), key KubeconfigSecretKey.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// KubeconfigSecretKey is the key of the kubeconfig in its secret.
const KubeconfigSecretKey = "value"

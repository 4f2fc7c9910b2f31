package api

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KindRollout is the kind of a fleet-wide generation rollout.
const KindRollout = "Rollout"

// OpRolloutStep is the operation type that holds the one-change-in-flight
// slot while a rollout step runs, so that no membership change runs beside it.
const OpRolloutStep OpType = "RolloutStep"

// Rollout rolls one NixOS configuration across the fleet, node by node. A
// person writes spec (nicoctl rollout start|pause|resume|undo); the
// coordinator's leader writes status.
type Rollout struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     RolloutSpec   `json:"spec"`
	Status   RolloutStatus `json:"status"`
}

// RolloutSpec is what to roll and how.
type RolloutSpec struct {
	// Template is every node's new configuration; its Flake, when empty,
	// selects the attribute named after the node. Its Generation is ignored:
	// each node gets the next generation number of its own.
	Template NixosConfigurationSpec `json:"template"`
	// Nodes limits the rollout to these nodes (all registered nodes when empty).
	Nodes []string `json:"nodes,omitempty"`
	// Templates, when they name a node, replace Template for that node
	// (a KubernetesCluster gives each machine its own flake attribute and
	// files).
	Templates map[string]NixosConfigurationSpec `json:"templates,omitempty"`
	// DeleteConfigurations deletes each node's configuration once it has
	// applied the rollout's: the machine keeps running it (a release to
	// its onRemoveFlake) and no longer has a desired configuration.
	DeleteConfigurations bool `json:"deleteConfigurations,omitempty"`
	// MaxUnavailable is how many data-plane nodes roll at once: a number
	// ("2") or a percentage of the data-plane nodes ("25%"); 1 when empty.
	// The control plane always rolls one node at a time.
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	// ControlPlaneFirst rolls the control plane before the data plane.
	// Kubernetes' version skew policy requires that no kubelet be newer
	// than the API servers: a generation that upgrades Kubernetes must reach
	// the control plane first. The default (data plane first) suits every
	// other change, because it exercises a generation on the nodes whose
	// loss does not threaten quorum before any etcd member takes it.
	ControlPlaneFirst bool `json:"controlPlaneFirst,omitempty"`
	// StepTimeout bounds how long one node may take to report the
	// generation applied and healthy (10 minutes when zero).
	StepTimeout Duration `json:"stepTimeout,omitempty"`
	// Paused stops the rollout from starting new steps; the step in flight
	// finishes.
	Paused bool `json:"paused,omitempty"`
	// Undo rolls every node the rollout touched back to the configuration
	// it had before, in the same order rules.
	Undo bool `json:"undo,omitempty"`
	// Kubernetes, when set, says which of the nodes are a
	// KubernetesCluster's Nodes (the cluster controller sets it on the
	// rollouts it writes).
	Kubernetes *RolloutKubernetes `json:"kubernetes,omitempty"`
}

// RolloutKubernetes ties a rollout's nodes to a KubernetesCluster's Nodes.
type RolloutKubernetes struct {
	// Cluster is the KubernetesCluster.
	Cluster string `json:"cluster"`
	// Workers are the nodes that run the cluster's kubelets, each under
	// the Node of its own name. Before a worker switches, its Node is
	// cordoned and drained through the eviction API (PodDisruptionBudgets
	// honoured; DaemonSet and mirror pods stay); after, the worker counts
	// as done only once its Node is Ready and its kubelet has reported
	// since the switch began (its Node Lease or Ready heartbeat), and the
	// Node is uncordoned (unless it was cordoned before the rollout by
	// someone other than nico). Undo reverts without draining.
	Workers []string `json:"workers,omitempty"`
	// ControlPlane are the nodes that run the cluster's API servers: each
	// counts as done only once its agent reports, after its switch
	// began, its own API server ready (/readyz); one that does not within
	// the step timeout halts the rollout, naming it.
	ControlPlane []string `json:"controlPlane,omitempty"`
	// Leaving are workers that leave the cluster (a release): drained
	// like Workers before their switch, neither awaited nor uncordoned
	// after (their Node is deleted once they are released).
	Leaving []string `json:"leaving,omitempty"`
}

// IsWorker tells whether node is one of the rollout's Kubernetes workers
// that stay in the cluster.
func (s RolloutSpec) IsWorker(node string) bool {
	return s.Kubernetes != nil && slices.Contains(s.Kubernetes.Workers, node)
}

// Drains tells whether node's Node is drained before its switch: a
// worker, staying or leaving.
func (s RolloutSpec) Drains(node string) bool {
	return s.IsWorker(node) || (s.Kubernetes != nil && slices.Contains(s.Kubernetes.Leaving, node))
}

// IsAPIServer tells whether node runs one of the rollout's Kubernetes
// API servers.
func (s RolloutSpec) IsAPIServer(node string) bool {
	return s.Kubernetes != nil && slices.Contains(s.Kubernetes.ControlPlane, node)
}

// Duration is a time.Duration written as "90s" in JSON.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("api: duration %q: want a Go duration such as 90s: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// BatchSize resolves MaxUnavailable for n data-plane nodes: at least 1.
func (s RolloutSpec) BatchSize(n int) (int, error) {
	v := strings.TrimSpace(s.MaxUnavailable)
	if v == "" {
		return 1, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.Atoi(p)
		if err != nil || pct <= 0 || pct > 100 {
			return 0, fmt.Errorf("api: maxUnavailable %q: want a number >= 1 or a percentage 1%%..100%%", s.MaxUnavailable)
		}
		return max(1, int(math.Floor(float64(n)*float64(pct)/100))), nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 {
		return 0, fmt.Errorf("api: maxUnavailable %q: want a number >= 1 or a percentage 1%%..100%%", s.MaxUnavailable)
	}
	return k, nil
}

// RolloutPhase is where a rollout is.
//
//	Pending --> Running <--resume/pause--> Paused
//	              |  \
//	              |   +--(a node failed or timed out)--> Halted
//	              v                                        |
//	          Succeeded          (undo, from any phase) ---+--> Undoing --> Undone
type RolloutPhase string

// Rollout phases.
const (
	RolloutPending   RolloutPhase = ""
	RolloutRunning   RolloutPhase = "Running"
	RolloutPaused    RolloutPhase = "Paused"
	RolloutHalted    RolloutPhase = "Halted"
	RolloutSucceeded RolloutPhase = "Succeeded"
	RolloutUndoing   RolloutPhase = "Undoing"
	RolloutUndone    RolloutPhase = "Undone"
)

// Finished tells whether the phase is final.
func (p RolloutPhase) Finished() bool {
	return p == RolloutSucceeded || p == RolloutUndone
}

// NodeRollPhase is one node's progress in a rollout.
type NodeRollPhase string

// Node progress phases.
const (
	NodePending    NodeRollPhase = ""
	NodeDraining   NodeRollPhase = "Draining" // a Kubernetes worker is cordoned and drained before it switches
	NodeApplying   NodeRollPhase = "Applying"
	NodeDone       NodeRollPhase = "Done"
	NodeRollFailed NodeRollPhase = "Failed"
	NodeReverting  NodeRollPhase = "Reverting"
	NodeReverted   NodeRollPhase = "Reverted"
)

// NodeProgress is one node in a rollout.
type NodeProgress struct {
	Name         string        `json:"name"`
	ControlPlane bool          `json:"controlPlane,omitempty"`
	Phase        NodeRollPhase `json:"phase,omitempty"`
	// Generation is the generation the rollout gave the node.
	Generation int64 `json:"generation,omitempty"`
	// Previous is the node's configuration before the rollout touched it
	// (nil: it had none), restored by undo.
	Previous   *NixosConfigurationSpec `json:"previous,omitempty"`
	StartedAt  time.Time               `json:"startedAt,omitzero"`
	FinishedAt time.Time               `json:"finishedAt,omitzero"`
	Message    string                  `json:"message,omitempty"`
	// Cordoned: the rollout cordoned the node's Node (it was schedulable
	// when its drain began) and uncordons it once it is done.
	Cordoned bool `json:"cordoned,omitempty"`
	// DrainStartedAt is when its drain began (a Kubernetes worker).
	DrainStartedAt time.Time `json:"drainStartedAt,omitzero"`
}

// RolloutStatus is the leader's journal of the rollout.
type RolloutStatus struct {
	Phase RolloutPhase `json:"phase,omitempty"`
	// Nodes are the nodes the rollout covers, in the order they roll.
	Nodes []NodeProgress `json:"nodes,omitempty"`
	// Current are the nodes of the step in flight.
	Current []string `json:"current,omitempty"`
	// Step counts the steps started; Operation is the step's journal entry.
	Step      int       `json:"step,omitempty"`
	Operation string    `json:"operation,omitempty"`
	StepSince time.Time `json:"stepSince,omitzero"`
	// HaltedNode and HaltedReason say which node stopped the rollout and why.
	HaltedNode   string    `json:"haltedNode,omitempty"`
	HaltedReason string    `json:"haltedReason,omitempty"`
	Message      string    `json:"message,omitempty"`
	StartedAt    time.Time `json:"startedAt,omitzero"`
	FinishedAt   time.Time `json:"finishedAt,omitzero"`
	UpdatedAt    time.Time `json:"updatedAt,omitzero"`
	Leader       string    `json:"leader,omitempty"`
}

// Node returns the progress of node name, or nil.
func (r *Rollout) Node(name string) *NodeProgress {
	for i := range r.Status.Nodes {
		if r.Status.Nodes[i].Name == name {
			return &r.Status.Nodes[i]
		}
	}
	return nil
}

// Counts returns how many nodes are finished (done, or reverted when
// undoing) out of how many the current direction covers.
func (r *Rollout) Counts() (done, total int) {
	for _, n := range r.Status.Nodes {
		if r.Spec.Undo {
			if n.Phase == NodePending {
				continue
			}
			total++
			if n.Phase == NodeReverted {
				done++
			}
			continue
		}
		total++
		if n.Phase == NodeDone {
			done++
		}
	}
	return done, total
}

// NewRollout returns a Rollout named name.
func NewRollout(name string) *Rollout {
	return &Rollout{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindRollout}, Metadata: ObjectMeta{Name: name}}
}

// GetTypeMeta implements Object.
func (r *Rollout) GetTypeMeta() *TypeMeta { return &r.TypeMeta }

// GetMetadata implements Object.
func (r *Rollout) GetMetadata() *ObjectMeta { return &r.Metadata }

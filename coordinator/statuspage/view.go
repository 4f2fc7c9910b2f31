package statuspage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// View is everything the page shows, read at one moment.
type View struct {
	At       time.Time
	Revision int64
	// Leader is the coordinator candidate that leads ("" when none campaigns).
	Leader   string
	Cluster  ClusterRow
	Members  []MemberRow
	Nodes    []NodeRow
	Op       *OpView
	Rollouts []RolloutView
	Pools    []PoolRow
	// Claims are the machines the declared clusters asked the pools for.
	Claims []ClaimRow
	// Kubernetes are the KubernetesCluster objects.
	Kubernetes []KubernetesRow
	// Problems are the parts that could not be read, each with its reason.
	Problems []string
}

// ClusterRow sums up the EtcdCluster, when there is one.
type ClusterRow struct {
	Known bool
	// Observed: the leader has written a status (fault tolerance, version).
	Observed       bool
	Voters         int // declared
	FaultTolerance int
	Version        string
	Alarms         []string
	Conditions     []api.Condition
}

// Read gathers a View from the store and etcd's member list. A part that
// cannot be read is left out and named in Problems; Read fails only when
// nothing can be read at all.
func Read(ctx context.Context, st *store.Store, now time.Time) (View, error) {
	v := View{At: now}
	rev, err := st.Revision(ctx)
	if err != nil {
		return v, fmt.Errorf("statuspage: read the store: %w", err)
	}
	v.Revision = rev
	problem := func(what string, err error) {
		v.Problems = append(v.Problems, what+": "+err.Error())
	}
	if v.Leader, err = st.Leader(ctx); err != nil {
		problem("leader", err)
	}
	ec := &api.EtcdCluster{}
	switch err := st.Get(ctx, store.EtcdClusterKey, ec); {
	case errors.Is(err, store.ErrNotFound):
		ec = nil
	case err != nil:
		problem("EtcdCluster", err)
		ec = nil
	default:
		v.Cluster = ClusterRow{Known: true, Observed: !ec.Status.UpdatedAt.IsZero() || ec.Status.ObservedRevision > 0, Voters: ec.Spec.Voters, FaultTolerance: ec.Status.FaultTolerance,
			Version: ec.Status.ClusterVersion, Alarms: ec.Status.Alarms, Conditions: ec.Status.Conditions}
	}
	if v.Members, err = readMembers(ctx, st, ec); err != nil {
		problem("etcd members", err)
	}
	if v.Nodes, err = readNodes(ctx, st); err != nil {
		problem("nodes", err)
	}
	if v.Op, err = readOp(ctx, st); err != nil {
		problem("operation in flight", err)
	}
	rollouts, _, err := store.List[api.Rollout](ctx, st, store.RolloutsDir)
	if err != nil {
		problem("rollouts", err)
	}
	v.Rollouts = rolloutViews(rollouts, now)
	pools, _, err := store.List[api.MachinePool](ctx, st, store.PoolsDir)
	if err != nil {
		problem("machine pools", err)
	}
	for _, p := range pools {
		v.Pools = append(v.Pools, PoolRow{Name: p.Metadata.Name, Count: p.Spec.Count, Claimed: p.Status.Claimed, Machines: p.Status.Machines,
			Running: p.Status.Running, Pending: p.Status.Pending, Conditions: p.Status.Conditions})
	}
	claims, _, err := store.List[api.MachineClaim](ctx, st, store.ClaimsDir)
	if err != nil {
		problem("machine claims", err)
	}
	for _, c := range claims {
		v.Claims = append(v.Claims, ClaimRow{Name: c.Metadata.Name, Pool: c.Spec.Pool, Machines: c.Status.Machines, Conditions: c.Status.Conditions})
	}
	if v.Kubernetes, err = readKubernetes(ctx, st); err != nil {
		problem("Kubernetes clusters", err)
	}
	return v, nil
}

// NodeRow is one registered node.
type NodeRow struct {
	Name  string
	Roles string
	Phase api.NodePhase
	// MemberState is the member's role (learner, voter), or standby or
	// removed for a node in that phase, whatever member its record last
	// named (api.NodeStatus.ShownMember).
	MemberState string
	// Liveness is alive, suspect or dead as the leader last wrote it, ""
	// when it has not, and removed for a removed node (its heartbeat is
	// gone by design: it is not a dead node).
	Liveness       string
	LivenessSince  time.Time
	LivenessReason string
	// Desired and Applied are the generation asked for and the one running;
	// GenPhase is where applying the desired one is.
	Desired   int64
	Applied   int64
	GenPhase  api.GenerationPhase
	LastError string
	Message   string
}

func readNodes(ctx context.Context, st *store.Store) ([]NodeRow, error) {
	nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
	if err != nil {
		return nil, err
	}
	live := api.NewLiveness()
	if err := st.Get(ctx, store.LivenessKey, live); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("liveness: %w", err)
	}
	configs, _, err := store.List[api.NixosConfiguration](ctx, st, store.NixosConfigsDir)
	if err != nil {
		return nil, fmt.Errorf("generations: %w", err)
	}
	gens := map[string]*api.NixosConfiguration{}
	for _, c := range configs {
		gens[c.Metadata.Name] = c
	}
	rows := make([]NodeRow, 0, len(nodes))
	for _, n := range nodes {
		roles := make([]string, len(n.Spec.Roles))
		for i, r := range n.Spec.Roles {
			roles[i] = string(r)
		}
		_, shown := n.Status.ShownMember()
		row := NodeRow{Name: n.Metadata.Name, Roles: strings.Join(roles, ","), Phase: n.Status.Phase,
			MemberState: shown, Message: n.Status.Message}
		if l, ok := live.Status.Nodes[n.Metadata.Name]; ok {
			row.Liveness, row.LivenessSince, row.LivenessReason = l.State, l.Since, l.Reason
		}
		if n.Status.Phase == api.NodeRemoved {
			row.Liveness, row.LivenessReason = "removed", "member removed and data wiped"
		}
		if g := gens[n.Metadata.Name]; g != nil {
			row.Desired, row.Applied, row.GenPhase, row.LastError = g.Spec.Generation, g.Status.AppliedGeneration, g.Status.Phase, g.Status.LastError
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// OpView is the operation in flight and its journal.
type OpView struct {
	Name    string
	Type    api.OpType
	Node    string
	Step    api.OpStep
	Phase   api.OpPhase
	Since   time.Time
	Leader  string
	Message string
	History []api.Event // newest first
}

func readOp(ctx context.Context, st *store.Store) (*OpView, error) {
	op, err := st.ActiveOp(ctx)
	if err != nil || op == nil {
		return nil, err
	}
	h := slices.Clone(op.Status.History)
	slices.Reverse(h)
	return &OpView{Name: op.Metadata.Name, Type: op.Spec.Type, Node: op.Spec.Node, Step: op.Status.Step,
		Phase: op.Status.Phase, Since: op.Status.StepSince, Leader: op.Status.Leader, Message: op.Status.Message, History: h}, nil
}

// PoolRow is one machine pool: Count is the operator's, Claimed what
// the clusters' claims ask beside it.
type PoolRow struct {
	Name                       string
	Count, Claimed             int
	Machines, Running, Pending int
	Conditions                 []api.Condition
}

// ClaimRow is one cluster's MachineClaim: the machines it asked a pool
// for, where they are, and whether their spread keeps quorum.
type ClaimRow struct {
	Name, Pool string
	Machines   []api.ClaimedMachine
	Conditions []api.Condition
}

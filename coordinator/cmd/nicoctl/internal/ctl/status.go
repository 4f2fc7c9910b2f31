package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// StatusView is the summary nicoctl status shows; its JSON form is stable.
type StatusView struct {
	ClusterID api.MemberID `json:"clusterID"`
	// Coordinator is the coordinator leader's name ("": none elected).
	Coordinator string `json:"coordinator"`
	// EtcdLeader names the etcd leader by node, else etcd name ("": none).
	EtcdLeader   string       `json:"etcdLeader"`
	EtcdLeaderID api.MemberID `json:"etcdLeaderID,omitempty"`
	// Voters, HealthyVoters and Quorum are as the quorum projection counts
	// them: voters without a registered node (ghosts; an external member
	// is none) are not healthy.
	Voters          int             `json:"voters"`
	HealthyVoters   int             `json:"healthyVoters"`
	Quorum          int             `json:"quorum"`
	QuorumOK        bool            `json:"quorumOK"`
	QuorumProblem   string          `json:"quorumProblem,omitempty"`
	Learners        []string        `json:"learners"`
	ActiveOperation *OperationBrief `json:"activeOperation,omitempty"`
	PendingJoins    []RequestBrief  `json:"pendingJoins"`
	PendingRemovals []RequestBrief  `json:"pendingRemovals"`
}

// OperationBrief names an operation and where it is.
type OperationBrief struct {
	Name    string      `json:"name"`
	Type    api.OpType  `json:"type"`
	Node    string      `json:"node"`
	Phase   api.OpPhase `json:"phase"`
	Step    api.OpStep  `json:"step"`
	Message string      `json:"message,omitempty"`
}

// RequestBrief is a pending request: its node and phase.
type RequestBrief struct {
	Node  string `json:"node"`
	Phase string `json:"phase"`
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarize the cluster: leaders, quorum, the active operation and pending requests",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				v, err := a.status(ctx, c)
				if err != nil {
					return err
				}
				return a.emit(v, func(w io.Writer) { printStatus(w, v) })
			})
		}),
	}
}

func (a *app) status(ctx context.Context, c *cluster) (*StatusView, error) {
	v := &StatusView{ClusterID: c.clusterID, Learners: []string{}, PendingJoins: []RequestBrief{}, PendingRemovals: []RequestBrief{}}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := c.members(ctx, nodes)
	if err != nil {
		return nil, err
	}
	if v.Coordinator, err = coordinator.Leader(ctx, c.st); err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Leader {
			v.EtcdLeader, v.EtcdLeaderID = label(m), m.ID
		}
		if m.Learner {
			v.Learners = append(v.Learners, label(m))
		}
	}
	p := membership.Project(ms, membership.Change{Kind: membership.NoChange})
	v.Voters, v.HealthyVoters, v.Quorum, v.QuorumOK, v.QuorumProblem = p.Voters, p.Healthy, p.Quorum, p.OK, p.Reason
	op, err := c.activeOp(ctx)
	if err != nil {
		return nil, err
	}
	if op != nil {
		v.ActiveOperation = &OperationBrief{Name: op.Metadata.Name, Type: op.Spec.Type, Node: op.Spec.Node,
			Phase: op.Status.Phase, Step: op.Status.Step, Message: op.Status.Message}
	}
	joins, _, err := store.List[api.JoinRequest](ctx, c.st, store.JoinsDir)
	if err != nil {
		return nil, fmt.Errorf("reading join requests: %w", err)
	}
	for _, j := range joins {
		if j.Status.Phase != api.JoinJoined && j.Status.Phase != api.JoinFailed {
			phase := string(j.Status.Phase)
			if phase == "" {
				phase = "Pending"
			}
			v.PendingJoins = append(v.PendingJoins, RequestBrief{Node: j.Spec.Node, Phase: phase})
		}
	}
	removals, _, err := store.List[api.RemoveRequest](ctx, c.st, store.RemovalsDir)
	if err != nil {
		return nil, fmt.Errorf("reading removal requests: %w", err)
	}
	for _, r := range removals {
		if !r.Status.Phase.Finished() {
			v.PendingRemovals = append(v.PendingRemovals, RequestBrief{Node: r.Spec.Node, Phase: requests.PhaseName(r.Status.Phase)})
		}
	}
	return v, nil
}

func printStatus(w io.Writer, v *StatusView) {
	field(w, "Cluster ID", v.ClusterID)
	field(w, "Coordinator leader", orNone(v.Coordinator))
	leader := "none"
	if v.EtcdLeader != "" {
		leader = fmt.Sprintf("%s (member %s)", v.EtcdLeader, v.EtcdLeaderID)
	}
	field(w, "etcd leader", leader)
	q := "ok"
	if !v.QuorumOK {
		q = "AT RISK: " + v.QuorumProblem
	}
	field(w, "Voters", fmt.Sprintf("%d/%d healthy, quorum %d (%s)", v.HealthyVoters, v.Voters, v.Quorum, q))
	field(w, "Learners", orNone(strings.Join(v.Learners, ", ")))
	active := "none"
	if o := v.ActiveOperation; o != nil {
		active = fmt.Sprintf("%s (%s %s, %s at %s)", o.Name, o.Type, o.Node, o.Phase, o.Step)
		if o.Message != "" {
			active += ": " + oneLine(o.Message)
		}
	}
	field(w, "Active operation", active)
	field(w, "Pending joins", briefs(v.PendingJoins))
	field(w, "Pending removals", briefs(v.PendingRemovals))
}

func briefs(rs []RequestBrief) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s (%s)", r.Node, r.Phase))
	}
	return orNone(strings.Join(parts, ", "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

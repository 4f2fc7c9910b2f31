package ctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// MemberView is one etcd member as nicoctl shows it; its JSON form is
// stable.
type MemberView struct {
	ID api.MemberID `json:"id"`
	// Name is the member's etcd name ("" until it has started).
	Name string `json:"name"`
	// Node is the registered node with the member's peer URL ("": none).
	Node string `json:"node"`
	// Status is voter, learner or unstarted.
	Status     string   `json:"status"`
	Healthy    bool     `json:"healthy"`
	Leader     bool     `json:"leader"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	RaftIndex  uint64   `json:"raftIndex"`
	// Progress is a learner's raft index as a fraction of the leader's
	// (0..1), and ETA the time left at the catch-up rate the leader's
	// coordinator observed (EtcdCluster status; 0: not known yet).
	Progress float64      `json:"progress,omitempty"`
	ETA      api.Duration `json:"eta,omitempty"`
}

// Member statuses.
const (
	StatusVoter     = "voter"
	StatusLearner   = "learner"
	StatusUnstarted = "unstarted"
)

func memberView(m membership.Member) MemberView {
	v := MemberView{ID: m.ID, Name: m.Name, Node: m.Node, Healthy: m.Healthy, Leader: m.Leader,
		PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, RaftIndex: m.RaftIndex}
	switch {
	case !m.Started():
		v.Status = StatusUnstarted
	case m.Learner:
		v.Status = StatusLearner
	default:
		v.Status = StatusVoter
	}
	if v.PeerURLs == nil {
		v.PeerURLs = []string{}
	}
	if v.ClientURLs == nil {
		v.ClientURLs = []string{}
	}
	return v
}

func (a *app) getCmd() *cobra.Command {
	members := &cobra.Command{
		Use:   "members",
		Short: "List the etcd members with their health and node",
		Args:  cobra.NoArgs,
		RunE:  runE(a.getMembers),
	}
	nodes := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "List the registered nodes",
		Args:    cobra.NoArgs,
		RunE:    runE(a.getNodes),
	}
	ops := &cobra.Command{
		Use:     "ops [NAME]",
		Aliases: []string{"op", "operations"},
		Short:   "List membership operations, or show one with its history",
		Args:    cobra.MaximumNArgs(1),
		RunE:    runE(a.getOps),
	}
	return group("get", "Show members, nodes, operations, rollouts, the EtcdCluster, KubernetesClusters or a cluster's kubeconfig",
		"get: members, nodes, ops, rollouts, etcdcluster, clusters or kubeconfig", members, nodes, ops, a.rolloutsGetCmd(), a.etcdClusterGetCmd(), a.clustersGetCmd(), a.kubeconfigGetCmd())
}

func (a *app) getMembers(cmd *cobra.Command, _ []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		nodes, err := c.nodes(ctx)
		if err != nil {
			return err
		}
		ms, err := c.members(ctx, nodes)
		if err != nil {
			return err
		}
		views := make([]MemberView, len(ms))
		for i, m := range ms {
			views[i] = memberView(m)
		}
		if err := c.learnerProgress(ctx, ms, views); err != nil {
			return err
		}
		return a.emit(views, func(w io.Writer) {
			row(w, "ID", "NAME", "STATUS", "HEALTH", "LEADER", "PEER URL", "CLIENT URL", "RAFT INDEX", "PROGRESS", "ETA")
			for _, v := range views {
				name := v.Node
				if name == "" && v.Name != "" {
					name = v.Name + " (no node)"
				}
				health, leader, index := "unhealthy", "", ""
				if v.Healthy {
					health = "healthy"
				}
				if v.Leader {
					leader = "*"
				}
				if v.RaftIndex > 0 {
					index = fmt.Sprint(v.RaftIndex)
				}
				progress, eta := "", ""
				if v.Status != StatusVoter {
					progress = fmt.Sprintf("%.0f%%", 100*v.Progress)
					if v.ETA > 0 {
						eta = time.Duration(v.ETA).String()
					}
				}
				row(w, v.ID, name, v.Status, health, leader, strings.Join(v.PeerURLs, ","), strings.Join(v.ClientURLs, ","), index, progress, eta)
			}
		})
	})
}

// learnerProgress sets each learner's progress from the raft indexes just
// read, and its ETA from the leader's EtcdCluster status (no status yet:
// no ETA).
func (c *cluster) learnerProgress(ctx context.Context, ms []membership.Member, views []MemberView) error {
	var leader uint64
	for _, m := range ms {
		if m.Leader {
			leader = m.RaftIndex
		}
	}
	ec := &api.EtcdCluster{}
	err := c.st.Get(ctx, store.EtcdClusterKey, ec)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("reading the EtcdCluster: %w", err)
	}
	eta := map[api.MemberID]api.Duration{}
	for _, m := range ec.Status.Members {
		eta[m.ID] = m.ETA
	}
	for i, m := range ms {
		if !m.Learner {
			continue
		}
		if leader > 0 {
			views[i].Progress = min(1, float64(m.RaftIndex)/float64(leader))
		}
		views[i].ETA = eta[m.ID]
	}
	return nil
}

func (a *app) getNodes(cmd *cobra.Command, _ []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		nodes, err := c.nodes(ctx)
		if err != nil {
			return err
		}
		alive, err := c.alive(ctx)
		if err != nil {
			return err
		}
		live, err := c.liveness(ctx)
		if err != nil {
			return err
		}
		now := a.now()
		return a.emit(nodes, func(w io.Writer) {
			row(w, "NAME", "ROLES", "PHASE", "MEMBER", "STATE", "ALIVE", "LIVENESS", "SINCE", "DATADIR", "AGE", "MESSAGE")
			for _, n := range nodes {
				roles := make([]string, len(n.Spec.Roles))
				for i, r := range n.Spec.Roles {
					roles[i] = string(r)
				}
				// A standby or removed node shows no member, whatever its
				// record last named, and a removed node is removed, not dead.
				id, memberState := n.Status.ShownMember()
				member := ""
				if id != 0 {
					member = id.String()
				}
				state, since := livenessCells(now, live[n.Metadata.Name])
				if n.Status.Phase == api.NodeRemoved {
					state = "removed"
				}
				row(w, n.Metadata.Name, strings.Join(roles, ","), n.Status.Phase, member, memberState,
					yesNo(alive[n.Metadata.Name]), state, since, dataDirCell(n.Status.DataDir), age(now, n.Metadata.CreatedAt), oneLine(n.Status.Message))
			}
		})
	})
}

func (a *app) getOps(cmd *cobra.Command, args []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		if len(args) == 1 {
			op := &api.Operation{}
			err := c.st.Get(ctx, store.OpKey(args[0]), op)
			if errors.Is(err, store.ErrNotFound) {
				return withCode(ExitNotFound, fmt.Errorf("no operation named %s; list them with 'nicoctl get ops'", args[0]))
			}
			if err != nil {
				return fmt.Errorf("reading operation %s: %w", args[0], err)
			}
			return a.emit(op, func(w io.Writer) { a.describeOp(w, op) })
		}
		ops, _, err := store.List[api.Operation](ctx, c.st, store.OpsDir)
		if err != nil {
			return fmt.Errorf("reading operations: %w", err)
		}
		now := a.now()
		return a.emit(ops, func(w io.Writer) {
			row(w, "NAME", "TYPE", "NODE", "PHASE", "STEP", "AGE", "MESSAGE")
			for _, op := range ops {
				row(w, op.Metadata.Name, op.Spec.Type, op.Spec.Node, op.Status.Phase, op.Status.Step,
					age(now, op.Metadata.CreatedAt), oneLine(op.Status.Message))
			}
		})
	})
}

// describeOp writes one operation and its history.
func (a *app) describeOp(w io.Writer, op *api.Operation) {
	now := a.now()
	field(w, "Name", op.Metadata.Name)
	field(w, "Type", op.Spec.Type)
	field(w, "Node", op.Spec.Node)
	if op.Spec.MemberID != 0 {
		field(w, "Member", op.Spec.MemberID)
	}
	field(w, "Peer URL", op.Spec.PeerURL)
	field(w, "Force", op.Spec.Force)
	field(w, "Started by", op.Spec.StartedBy)
	field(w, "Created", fmt.Sprintf("%s (%s ago)", op.Metadata.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), age(now, op.Metadata.CreatedAt)))
	field(w, "Phase", op.Status.Phase)
	field(w, "Step", fmt.Sprintf("%s (for %s)", op.Status.Step, age(now, op.Status.StepSince)))
	field(w, "Leader", op.Status.Leader)
	field(w, "Message", oneLine(op.Status.Message))
	fmt.Fprintln(w, "History:")
	if len(op.Status.History) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	row(w, "  AT", "STEP", "LEADER", "MESSAGE")
	for _, e := range op.Status.History {
		row(w, "  "+e.At.Format("2006-01-02T15:04:05.000Z07:00"), e.Step, e.Leader, oneLine(e.Message))
	}
}

// dataDirCell is the free space of a node's etcd data dir, as
// "free/size": "" unmeasured, "FULL:free/size" under api.DataDirFullBelow.
func dataDirCell(d *api.DataDirStatus) string {
	if d == nil {
		return ""
	}
	free := cmp.Or(bytesCell(d.FreeBytes), "0B")
	if d.Full {
		return "FULL:" + free + "/" + bytesCell(d.SizeBytes)
	}
	return free + "/" + bytesCell(d.SizeBytes)
}

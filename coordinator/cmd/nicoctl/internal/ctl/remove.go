package ctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/requests"
	"github.com/spf13/cobra"
)

// removeOpts are the flags of remove node.
type removeOpts struct {
	force       bool
	noWait      bool
	waitTimeout time.Duration
}

func (a *app) removeCmd() *cobra.Command {
	var o removeOpts
	node := &cobra.Command{
		Use:   "node NAME",
		Short: "Ask the coordinator's leader to remove a node's etcd member",
		Long: `Remove a node's etcd member through the coordinator's leader.

nicoctl first projects the quorum locally and refuses at once (exit 3) when the
removal would leave fewer healthy voters than quorum; --force files it anyway
(the leader still never removes the last voting member). It then files the
request and waits for the leader's answer: exit 0 when done, 3 when refused,
1 when failed.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.removeNode(cmd.Context(), args[0], o) }),
	}
	node.Flags().BoolVar(&o.force, "force", false, "remove even when the projected quorum is unsafe")
	node.Flags().BoolVar(&o.noWait, "no-wait", false, "file the request and return without waiting for the leader's answer")
	node.Flags().DurationVar(&o.waitTimeout, "wait-timeout", 5*time.Minute, "how long to wait for the leader's answer")
	return group("remove", "Remove things from the fleet", "remove: node", node)
}

func (a *app) removeNode(ctx context.Context, name string, o removeOpts) error {
	c, r, err := a.fileRemoval(ctx, name, o)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.noWait {
		if a.cfg.Output != "table" {
			return a.emit(r, nil)
		}
		fmt.Fprintf(a.stdout, "removal of %s requested; follow it with 'nicoctl get ops'\n", name)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.waitTimeout)
	defer cancel()
	last, err := requests.WaitRemoval(wctx, c.st, name, func(r *api.RemoveRequest) {
		if a.cfg.Output == "table" {
			fmt.Fprintln(a.stdout, progressLine(r))
		}
	})
	switch {
	case errors.Is(err, requests.ErrRefused):
		return withCode(ExitRefused, fmt.Errorf("the leader refused to remove %s: %s", name, last.Status.Message))
	case errors.Is(err, requests.ErrFailed):
		return withCode(ExitFailed, fmt.Errorf("removal of %s failed (operation %s): %s", name, last.Status.Operation, last.Status.Message))
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return withCode(ExitFailed, fmt.Errorf("no final answer within %s (--wait-timeout); the request stays filed, follow it with 'nicoctl get ops': %w", o.waitTimeout, err))
	case err != nil:
		return err
	}
	if a.cfg.Output != "table" {
		return a.emit(last, nil)
	}
	return nil
}

// fileRemoval checks the removal of name locally and files it; it returns
// the open connection for the wait.
func (a *app) fileRemoval(ctx context.Context, name string, o removeOpts) (*cluster, *api.RemoveRequest, error) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	c, err := a.connect(rctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := a.checkAndFile(rctx, c, name, o)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, r, nil
}

func (a *app) checkAndFile(ctx context.Context, c *cluster, name string, o removeOpts) (*api.RemoveRequest, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := c.members(ctx, nodes)
	if err != nil {
		return nil, err
	}
	m := memberOf(ms, name)
	if m == nil && !slices.ContainsFunc(nodes, func(n *api.Node) bool { return n.Metadata.Name == name }) {
		var known []string
		for _, n := range nodes {
			known = append(known, n.Metadata.Name)
		}
		list := strings.Join(known, ", ")
		if list == "" {
			list = "(none)"
		}
		return nil, withCode(ExitNotFound, fmt.Errorf("no node named %s; known nodes: %s", name, list))
	}
	if m != nil {
		if reason, never := removalBlocker(ms, m); reason != "" {
			if !o.force || never {
				return nil, withCode(ExitRefused, fmt.Errorf("refusing to remove %s: %s", name, reason))
			}
			fmt.Fprintf(a.stderr, "WARNING: forcing the removal of %s although %s; the cluster may lose quorum and stop serving, and writes not yet replicated to the remaining voters may be lost\n", name, reason)
		}
	}
	leader, err := coordinator.Leader(ctx, c.st)
	if err != nil {
		return nil, err
	}
	if leader == "" {
		fmt.Fprintf(a.stderr, "WARNING: no coordinator is leader; the removal of %s waits until one is elected\n", name)
	}
	r, err := requests.RequestRemoval(ctx, c.st, name, o.force, requester())
	if errors.Is(err, requests.ErrRemovalPending) {
		return nil, withCode(ExitFailed, fmt.Errorf("%w; wait for it with 'nicoctl get ops'", err))
	}
	return r, err
}

// removalBlocker is the local quorum check: why removing m is unsafe, or "";
// never is set when not even --force may remove it (the last voter).
func removalBlocker(ms []membership.Member, m *membership.Member) (reason string, never bool) {
	if m.Learner {
		return "", false
	}
	voters := 0
	for _, x := range ms {
		if !x.Learner {
			voters++
		}
	}
	if voters <= 1 {
		return fmt.Sprintf("%s is the last voting member; removing it would destroy the cluster", label(*m)), true
	}
	if p := membership.Project(ms, membership.Change{Kind: membership.RemoveChange, Member: m.ID}); !p.OK {
		return p.Reason, false
	}
	return "", false
}

// progressLine describes a removal's phase.
func progressLine(r *api.RemoveRequest) string {
	s := fmt.Sprintf("removal of %s: %s", r.Spec.Node, requests.PhaseName(r.Status.Phase))
	var extra []string
	if r.Status.Operation != "" {
		extra = append(extra, "op "+r.Status.Operation)
	}
	if r.Status.Message != "" {
		extra = append(extra, oneLine(r.Status.Message))
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ": ") + ")"
	}
	return s
}

// requester names who files a request: nicoctl, the user and the host.
func requester() string {
	who := "nicoctl"
	if u, err := user.Current(); err == nil {
		who += ":" + u.Username
	}
	if h, err := os.Hostname(); err == nil {
		who += "@" + h
	}
	return who
}

package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

func (a *app) rolloutsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rollouts",
		Aliases: []string{"rollout"},
		Short:   "List the rollouts, newest first, with their phase and progress",
		Long: "List every rollout, newest first: its phase, nodes done of total, the node(s) it rolls now,\n" +
			"its age, and what it does or waits for now, or where it halted and why. 'nicoctl rollout\n" +
			"status NAME' shows one node by node; -o json|yaml gives the Rollout objects.",
		Args: cobra.NoArgs,
		RunE: runE(a.getRollouts),
	}
}

func (a *app) getRollouts(cmd *cobra.Command, _ []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		all, _, err := store.List[api.Rollout](ctx, c.st, store.RolloutsDir)
		if err != nil {
			return withCode(ExitFailed, err)
		}
		slices.SortStableFunc(all, func(x, y *api.Rollout) int { return y.Metadata.CreatedAt.Compare(x.Metadata.CreatedAt) })
		if all == nil {
			all = []*api.Rollout{}
		}
		now := a.now()
		return a.emit(all, func(w io.Writer) {
			row(w, "NAME", "PHASE", "NODES", "CURRENT", "AGE", "MESSAGE")
			for _, r := range all {
				done, total := r.Counts()
				phase := string(r.Status.Phase)
				if phase == "" {
					phase = "Pending"
				}
				row(w, r.Metadata.Name, phase, fmt.Sprintf("%d/%d", done, total), strings.Join(r.Status.Current, ","),
					age(now, r.Metadata.CreatedAt), oneLine(rolloutMessage(r)))
			}
		})
	})
}

// rolloutMessage says what a rollout waits on or why it stopped.
func rolloutMessage(r *api.Rollout) string {
	switch {
	case r.Status.Phase == api.RolloutHalted:
		return fmt.Sprintf("halted at %s: %s", r.Status.HaltedNode, r.Status.HaltedReason)
	case r.Spec.Undo && !r.Status.Phase.Finished():
		return "undo requested"
	case r.Spec.Paused && !r.Status.Phase.Finished():
		return "paused"
	case !r.Status.Phase.Finished():
		return r.Status.Message
	}
	return ""
}

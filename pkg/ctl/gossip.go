package ctl

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/spf13/cobra"
)

// gossipCmd is `nicoctl gossip rotate-key|key`.
func (a *app) gossipCmd() *cobra.Command {
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Move the gossip mesh to the next key generation (derived from the cluster token); members follow without a restart",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				gen, err := gossipkey.Rotate(ctx, c.st, "nicoctl", a.now())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "gossip key generation %d; members install it within seconds and keep generation %d's key meanwhile\n", gen, gen-1)
				return nil
			})
		},
	}
	show := &cobra.Command{
		Use:   "key",
		Short: "Show the gossip key generation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				k, err := gossipkey.Current(ctx, c.st)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "generation %d\n", k.Spec.Generation)
				return nil
			})
		},
	}
	return group("gossip", "Gossip mesh keys", "gossip: rotate-key or key", rotate, show)
}

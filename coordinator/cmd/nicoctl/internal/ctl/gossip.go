package ctl

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/pki"
	"github.com/spf13/cobra"
)

// gossipCmd is `nicoctl gossip rotate-key [--new-secret]|key`.
func (a *app) gossipCmd() *cobra.Command {
	var newSecret, skipUnsealable bool
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Move the gossip mesh to the next key generation; with --new-secret, derived from a new random secret sealed to each node; members follow without a restart",
		Long: `Move the gossip mesh to the next key generation; members follow within seconds
without a restart and keep the previous generation's key meanwhile.

Keys derive from the cluster's gossip secret (at first the bootstrap machine's
token). A new generation alone does not help when that secret leaked: with
--new-secret, a new random secret is sealed to the published node certificate
of every registered node (only that node's node.key opens it) and the new
generation derives from it. A node that cannot be sealed to (no published
certificate, or one the cluster CA did not sign) would drop out of the mesh:
the rotation is refused unless --skip-unsealable; such a node gets the secret
when it joins again.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				if newSecret {
					return a.rotateSecret(ctx, c, skipUnsealable)
				}
				gen, err := gossipkey.Rotate(ctx, c.st, "nicoctl", a.now())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "gossip key generation %d; members install it within seconds and keep generation %d's key meanwhile\n", gen, gen-1)
				return nil
			})
		}),
	}
	rotate.Flags().BoolVar(&newSecret, "new-secret", false, "derive the new generation from a new random secret, sealed to each node's certificate key")
	rotate.Flags().BoolVar(&skipUnsealable, "skip-unsealable", false, "with --new-secret, rotate even if some nodes cannot be sealed to (they leave the mesh until they join again)")
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
				if g := k.Spec.SecretGeneration; g > 0 {
					fmt.Fprintf(a.stdout, "secret replaced at generation %d\n", g)
				} else {
					fmt.Fprintln(a.stdout, "secret: the bootstrap machine's token (never replaced; see rotate-key --new-secret)")
				}
				return nil
			})
		},
	}
	return group("gossip", "Gossip mesh keys", "gossip: rotate-key or key", rotate, show)
}

// rotateSecret is rotate-key --new-secret.
func (a *app) rotateSecret(ctx context.Context, c *cluster, skipUnsealable bool) error {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	var roots *x509.CertPool
	if a.cfg.TLS.CAFile != "" {
		if roots, err = pki.LoadPool(a.cfg.TLS.CAFile); err != nil {
			return withCode(ExitUsage, fmt.Errorf("tls.caFile: %w", err))
		}
	}
	to, skipped := gossipkey.Recipients(nodes, roots, a.now())
	var why []string
	for _, name := range slices.Sorted(maps.Keys(skipped)) {
		why = append(why, fmt.Sprintf("%s: %s", name, skipped[name]))
	}
	if len(why) > 0 && !skipUnsealable {
		return withCode(ExitRefused, fmt.Errorf("%d node(s) cannot be sealed to and would leave the gossip mesh:\n  %s\nstart their agents (they publish their node certificate), remove them, or give --skip-unsealable", len(why), strings.Join(why, "\n  ")))
	}
	for _, w := range why {
		fmt.Fprintf(a.stderr, "warning: no sealed secret for node %s; it gets the secret when it joins again\n", w)
	}
	gen, err := gossipkey.RotateSecret(ctx, c.st, to, "nicoctl", a.now())
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "gossip key generation %d derives from a new secret, sealed to %d node(s); members install it within seconds and keep generation %d's key meanwhile\n", gen, len(to), gen-1)
	return nil
}

package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/token"
	"github.com/spf13/cobra"
)

// tokenCmd is `nicoctl token create|list|revoke`.
func (a *app) tokenCmd() *cobra.Command {
	return group("token", "Join tokens: the only secret a new machine needs", "token: create, list or revoke",
		a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd())
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var ttl time.Duration
	var roles []string
	var desc string
	c := &cobra.Command{
		Use:   "create",
		Short: "Make a join token; it is printed once and cannot be shown again without --show-secrets",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			spec := token.Spec{TTL: ttl, Description: desc}
			if ttl < 0 {
				return withCode(ExitUsage, fmt.Errorf("--ttl %s is not accepted; use a positive duration such as 24h, or 0 for a token that never expires", ttl))
			}
			for _, r := range roles {
				if !slices.Contains(token.AllRoles, api.Role(r)) {
					return withCode(ExitUsage, fmt.Errorf("--roles %q is not accepted; use worker, controlPlane, hypervisor or several", r))
				}
				spec.Roles = append(spec.Roles, api.Role(r))
			}
			return a.withTokens(cmd.Context(), func(ctx context.Context, reg *token.Registry) error {
				tok, obj, err := reg.Create(ctx, spec, a.now())
				if err != nil {
					return err
				}
				if a.cfg.Output != "table" {
					return a.emit(tokenView(obj, true), nil)
				}
				fmt.Fprintln(a.stdout, tok.Reveal())
				until := "never expires"
				if !obj.Spec.ExpiresAt.IsZero() {
					until = "expires " + obj.Spec.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(a.stderr, "token %s allows %s and %s; it is shown once: put it in the new machine's tokenFile\n", tok.ID, rolesText(obj.Spec.Roles), until)
				return nil
			})
		}),
	}
	c.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token works; 0: until revoked")
	c.Flags().StringSliceVar(&roles, "roles", []string{string(api.RoleWorker)}, "roles a machine may take with the token: worker, controlPlane, hypervisor")
	c.Flags().StringVar(&desc, "description", "", "what the token is for (shown by token list)")
	return c
}

func (a *app) tokenListCmd() *cobra.Command {
	var show bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List join tokens (ids, roles, expiry, uses); secrets only with --show-secrets",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withTokens(cmd.Context(), func(ctx context.Context, reg *token.Registry) error {
				toks, err := reg.List(ctx)
				if err != nil {
					return err
				}
				views := make([]tokenOut, len(toks))
				for i, t := range toks {
					views[i] = tokenView(t, show)
				}
				now := a.now()
				return a.emit(views, func(w io.Writer) {
					head := []any{"ID", "ROLES", "STATE", "EXPIRES", "USES", "LAST USED BY", "DESCRIPTION"}
					if show {
						head = append(head, "TOKEN")
					}
					row(w, head...)
					for _, t := range toks {
						expires := "never"
						if !t.Spec.ExpiresAt.IsZero() {
							expires = t.Spec.ExpiresAt.Format(time.RFC3339)
						}
						cols := []any{t.Metadata.Name, rolesText(t.Spec.Roles), tokenState(t, now), expires, t.Status.Uses, t.Status.LastUsedBy, t.Spec.Description}
						if show {
							cols = append(cols, token.Token{ID: t.Metadata.Name, Secret: t.Spec.Secret}.Reveal())
						}
						row(w, cols...)
					}
				})
			})
		}),
	}
	c.Flags().BoolVar(&show, "show-secrets", false, "show each token whole, secret included")
	return c
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <id>",
		Short: "Revoke a join token: machines can no longer join with it (joined machines keep their certificates)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if t, err := token.Parse(id); err == nil {
				id = t.ID // a whole token was given: use its id, never echo it
			}
			return a.withTokensOn(cmd.Context(), func(ctx context.Context, reg *token.Registry, c *cluster) error {
				t, err := reg.Revoke(ctx, id, a.now())
				if errors.Is(err, token.ErrUnknown) {
					return withCode(ExitNotFound, err)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "token %s revoked at %s\n", t.Metadata.Name, t.Status.RevokedAt.Format(time.RFC3339))
				a.warnGossipSecret(ctx, c, t)
				return nil
			})
		}),
	}
}

// withTokens runs fn with the token registry, which needs the store's
// secrets key.
func (a *app) withTokens(ctx context.Context, fn func(ctx context.Context, reg *token.Registry) error) error {
	return a.withTokensOn(ctx, func(ctx context.Context, reg *token.Registry, _ *cluster) error { return fn(ctx, reg) })
}

// withTokensOn is withTokens handing fn the cluster connection too.
func (a *app) withTokensOn(ctx context.Context, fn func(ctx context.Context, reg *token.Registry, c *cluster) error) error {
	box, err := secretbox.Load(a.cfg.Secrets.KeyFile)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("nicoctl token needs the store's secrets key (secrets.keyFile): %w; run it on a control-plane machine or give --secrets.keyFile", err))
	}
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		return fn(ctx, token.NewRegistry(secrets.New(c.st, box)), c)
	})
}

// tokenOut is a token as nicoctl prints it (-o json|yaml): the whole
// token only when asked.
type tokenOut struct {
	ID          string     `json:"id"`
	Token       string     `json:"token,omitempty"`
	Roles       []api.Role `json:"roles"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   time.Time  `json:"expiresAt,omitzero"`
	RevokedAt   time.Time  `json:"revokedAt,omitzero"`
	Description string     `json:"description,omitempty"`
	Uses        int        `json:"uses"`
	LastUsedAt  time.Time  `json:"lastUsedAt,omitzero"`
	LastUsedBy  string     `json:"lastUsedBy,omitempty"`
}

func tokenView(t *api.Token, secret bool) tokenOut {
	v := tokenOut{ID: t.Metadata.Name, Roles: t.Spec.Roles, CreatedAt: t.Metadata.CreatedAt, ExpiresAt: t.Spec.ExpiresAt,
		RevokedAt: t.Status.RevokedAt, Description: t.Spec.Description, Uses: t.Status.Uses, LastUsedAt: t.Status.LastUsedAt, LastUsedBy: t.Status.LastUsedBy}
	if secret {
		v.Token = token.Token{ID: t.Metadata.Name, Secret: t.Spec.Secret}.Reveal()
	}
	return v
}

func tokenState(t *api.Token, now time.Time) string {
	switch {
	case t.Revoked():
		return "revoked"
	case t.Expired(now):
		return "expired"
	default:
		return "active"
	}
}

func rolesText(roles []api.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// warnGossipSecret warns, after t was revoked, when the gossip keys still
// derive from it: until the first rotate-key --new-secret the cluster's
// gossip secret is the bootstrap machine's token, and revoking a token
// stops joins with it, not its holder's reading of the mesh.
func (a *app) warnGossipSecret(ctx context.Context, c *cluster, t *api.Token) {
	if !strings.HasPrefix(t.Spec.Description, bootstrapTokenDescription) {
		return
	}
	k, err := gossipkey.Current(ctx, c.st)
	if err != nil || k.Spec.SecretGeneration > 0 {
		return
	}
	fmt.Fprintf(a.stderr, "warning: the gossip mesh's keys still derive from token %s (the bootstrap token): whoever holds it can still read and join the mesh; run nicoctl gossip rotate-key --new-secret to replace the secret\n", t.Metadata.Name)
}

// bootstrapTokenDescription starts the description of the bootstrap
// machine's token as its join endpoint registers it.
const bootstrapTokenDescription = "bootstrap token"

package token

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// AllRoles are the roles a token may allow; the bootstrap token allows
// them all.
var AllRoles = []api.Role{api.RoleControlPlane, api.RoleWorker, api.RoleHypervisor}

// Registry keeps the cluster's tokens, sealed, under store.TokensDir.
type Registry struct {
	s *secrets.Store
}

// NewRegistry returns a Registry over s.
func NewRegistry(s *secrets.Store) *Registry { return &Registry{s: s} }

// Spec is what a new token allows.
type Spec struct {
	Roles       []api.Role
	TTL         time.Duration // 0: never expires
	Description string
}

// Create makes and stores a new token; its secret is in the returned
// Token (show it once) and, sealed, in the store.
func (r *Registry) Create(ctx context.Context, spec Spec, now time.Time) (Token, *api.Token, error) {
	for {
		tok, err := Generate()
		if err != nil {
			return Token{}, nil, err
		}
		obj, err := r.Register(ctx, tok, spec, now)
		if errors.Is(err, store.ErrExists) {
			continue // id taken (1 in 2^31 per token): draw another
		}
		return tok, obj, err
	}
}

// Register stores tok as given (the bootstrap machine's token file);
// store.ErrExists when its id is taken, or was taken by a token since
// pruned (Prune): an id is never reused, so a revoked bootstrap token
// cannot come back when its machine registers it again.
func (r *Registry) Register(ctx context.Context, tok Token, spec Spec, now time.Time) (*api.Token, error) {
	if len(spec.Roles) == 0 {
		return nil, fmt.Errorf("token: %s: no roles; a token allows at least one of %v", tok.ID, AllRoles)
	}
	obj := api.NewToken(tok.ID)
	obj.Metadata.CreatedAt = now.UTC()
	obj.Spec = api.TokenSpec{Secret: tok.Secret, Roles: spec.Roles, Description: spec.Description}
	if spec.TTL > 0 {
		obj.Spec.ExpiresAt = now.UTC().Add(spec.TTL)
	}
	if err := r.s.CreateIf(ctx, obj, store.Absent(store.TokenTombstoneKey(tok.ID))); err != nil {
		return nil, fmt.Errorf("token: register %s: %w", tok.ID, err)
	}
	return obj, nil
}

// Get reads token id; ErrUnknown when there is none.
func (r *Registry) Get(ctx context.Context, id string) (*api.Token, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("%w: %q is not a token id (%d characters of [a-z0-9])", ErrUnknown, truncate(id), IDLen)
	}
	obj := api.NewToken(id)
	err := r.s.Get(ctx, store.TokenKey(id), obj)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no token %s", ErrUnknown, id)
	}
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return obj, nil
}

// List reads every token, by id.
func (r *Registry) List(ctx context.Context) ([]*api.Token, error) {
	toks, _, err := secrets.List[api.Token](ctx, r.s, store.TokensDir)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return toks, nil
}

// Revoke stops token id from working; revoking it again keeps the first
// time.
func (r *Registry) Revoke(ctx context.Context, id string, now time.Time) (*api.Token, error) {
	return r.modify(ctx, id, func(t *api.Token) bool {
		if t.Revoked() {
			return false
		}
		t.Status.RevokedAt = now.UTC()
		return true
	})
}

// Used records a join that token id allowed.
func (r *Registry) Used(ctx context.Context, id, node string, now time.Time) error {
	_, err := r.modify(ctx, id, func(t *api.Token) bool {
		t.Status.Uses++
		t.Status.LastUsedAt, t.Status.LastUsedBy = now.UTC(), node
		return true
	})
	return err
}

// modify applies change with compare-and-swap, again on conflict.
func (r *Registry) modify(ctx context.Context, id string, change func(*api.Token) bool) (*api.Token, error) {
	for {
		t, err := r.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if !change(t) {
			return t, nil
		}
		err = r.s.Update(ctx, t)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("token: %s: %w", id, err)
		}
		return t, nil
	}
}

// truncate shortens what a user typed as an id for an error message.
func truncate(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

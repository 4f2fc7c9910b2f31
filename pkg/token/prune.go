package token

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// DefaultPruneAfter is how long an expired or revoked token is kept (and
// listed as such by nicoctl token list) before Prune deletes it.
const DefaultPruneAfter = 24 * time.Hour

// Prunable tells whether stored token tok is done with for good at now:
// revoked, or expired, more than grace ago. It is pure.
//
//	revokedAt + grace ≤ now ─▶ prune
//	expiresAt + grace ≤ now ─▶ prune   (a token that never expires: never)
//	otherwise              ─▶ keep     (active, or shown as expired/revoked)
func Prunable(tok *api.Token, now time.Time, grace time.Duration) bool {
	if tok.Revoked() && !now.Before(tok.Status.RevokedAt.Add(grace)) {
		return true
	}
	return !tok.Spec.ExpiresAt.IsZero() && !now.Before(tok.Spec.ExpiresAt.Add(grace))
}

// Prune deletes every token Prunable at now and leaves a tombstone of its
// id (store.TokenTombstoneKey), so that the id is never registered again.
// Each deletion is conditional on the revision the token was read at: a
// token changed meanwhile, or pruned by another control-plane machine, is
// left to the next pass. It returns the ids it deleted.
func (r *Registry) Prune(ctx context.Context, now time.Time, grace time.Duration) ([]string, error) {
	if grace < 0 {
		return nil, fmt.Errorf("token: prune grace %s is not accepted; use 0 or more", grace)
	}
	toks, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	var pruned []string
	for _, t := range toks {
		if !Prunable(t, now, grace) {
			continue
		}
		id := t.Metadata.Name
		tomb := store.PutValueOp(store.TokenTombstoneKey(id), now.UTC().Format(time.RFC3339))
		err := r.s.DeleteUnchanged(ctx, t, tomb)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case err != nil:
			return pruned, fmt.Errorf("token: prune %s: %w", id, err)
		}
		pruned = append(pruned, id)
	}
	return pruned, nil
}

package agent

import (
	"context"
	"time"

	"github.com/homystack/nico/pkg/token"
)

// pruneTokens deletes the join tokens revoked or expired more than
// TokenPruneAfter ago (token.Registry.Prune), once at start and then every
// TokenPruneInterval, until ctx ends. Every control-plane machine's
// endpoint runs it: each deletion is conditional on the revision read, so
// two endpoints never undo each other. It logs token ids only.
func (j *JoinEndpoint) pruneTokens(ctx context.Context, reg *token.Registry) {
	grace, every := j.cfg.TokenPruneAfter, j.cfg.TokenPruneInterval
	if grace <= 0 {
		grace = token.DefaultPruneAfter
	}
	if every <= 0 {
		every = time.Hour
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ids, err := reg.Prune(ctx, j.Now(), grace)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			j.log.Warn("pruning join tokens failed; retrying at the next pass", "err", err, "pruned", ids)
		case len(ids) > 0:
			j.log.Info("pruned join tokens expired or revoked long ago", "tokens", ids, "after", grace)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

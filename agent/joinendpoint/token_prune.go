package joinendpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/token"
)

// tokenPrune is the controller that deletes the join tokens revoked or
// expired more than TokenPruneAfter ago (token.Registry.Prune), once at
// start and then every TokenPruneInterval (tick-only: the clock decides).
// Every control-plane machine's endpoint runs it: each deletion is
// conditional on the revision read, so two endpoints never undo each
// other. It logs token ids only; a failed pass is retried with backoff.
func (j *Endpoint) tokenPrune(reg *token.Registry) controller.Controller {
	grace, every := j.cfg.TokenPruneAfter, j.cfg.TokenPruneInterval
	if grace <= 0 {
		grace = token.DefaultPruneAfter
	}
	if every <= 0 {
		every = time.Hour
	}
	return &controller.Func{ControllerName: "token-prune", Resync: every, Do: func(ctx context.Context) error {
		ids, err := reg.Prune(ctx, j.Now(), grace)
		if len(ids) > 0 {
			j.log.Info("pruned join tokens expired or revoked long ago", "tokens", ids, "after", grace)
		}
		if err != nil {
			return fmt.Errorf("join endpoint: prune join tokens: %w", err)
		}
		return nil
	}}
}

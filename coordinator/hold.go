package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// errClusterMoved is a guard's error: the cluster ID record changed.
var errClusterMoved = errors.New("coordinator: the cluster ID record was written meanwhile")

// holdGate keeps a leader's controllers off a cluster that a restore or a
// recovery holds (store.Hold): each pass first reads the hold and, while
// there is one, plans and writes nothing. It is read on every pass rather
// than once per term: a leader elected in the old cluster keeps its
// session (its lease and election key are in the snapshot) when the
// restored member answers at the old address, and its controllers would
// otherwise go on planning from the snapshot's state.
//
// A fleet that has no record of its cluster gets one, fenced, by the first
// leader that finds it absent and the cluster not held.
type holdGate struct {
	st    *store.Store
	fence store.Fence
	log   *slog.Logger

	mu      sync.Mutex
	lastWhy string
	// seen saves the read of the operation in flight on each pass.
	seen store.HoldSeen
}

// wrap returns do gated on the hold.
func (g *holdGate) wrap(do func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		why, err := g.check(ctx)
		if err != nil {
			return err
		}
		if why != "" {
			return nil
		}
		return do(ctx)
	}
}

// check reads the hold, logs its changes, records the cluster's ID when
// the fleet has none; it returns why the cluster is held ("" when not).
func (g *holdGate) check(ctx context.Context) (string, error) {
	why, recorded, id, err := g.st.Hold(ctx, &g.seen)
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	if why != g.lastWhy {
		if why != "" {
			g.log.Info("cluster held: planning nothing until it is handed over", "why", why)
		} else {
			g.log.Info("cluster no longer held")
		}
		g.lastWhy = why
	}
	g.mu.Unlock()
	if why != "" || recorded {
		return why, nil
	}
	_, err = g.st.FencedTxn(ctx, g.fence, []store.Guard{{Cmp: store.Absent(store.ClusterIDKey), Err: errClusterMoved}}, store.RecordClusterIDOp(id))
	if errors.Is(err, errClusterMoved) {
		return g.check(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("record the cluster's ID: %w", err)
	}
	return "", nil
}

// gated wraps the Do of every controller in cs that is a controller.Func.
func (g *holdGate) gated(cs []controller.Controller) []controller.Controller {
	for _, c := range cs {
		if f, ok := c.(*controller.Func); ok {
			f.Do = g.wrap(f.Do)
			// The end of a hold wakes every controller.
			for _, k := range []string{store.ClusterIDKey, store.ActiveOpKey} {
				if !slices.Contains(f.Prefixes, k) {
					f.Prefixes = append(f.Prefixes, k)
				}
			}
		}
	}
	return cs
}

package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// liveness reads the coordinator leader's view of node liveness (empty
// before a leader has written it).
func (c *cluster) liveness(ctx context.Context) (map[string]api.NodeLiveness, error) {
	l := &api.Liveness{}
	err := c.st.Get(ctx, store.LivenessKey, l)
	if errors.Is(err, store.ErrNotFound) {
		return map[string]api.NodeLiveness{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading liveness: %w", err)
	}
	return l.Status.Nodes, nil
}

// livenessCells renders a node's liveness and how long it has held.
func livenessCells(now time.Time, l api.NodeLiveness) (string, string) {
	if l.State == "" {
		return "-", "-"
	}
	return l.State, age(now, l.Since)
}

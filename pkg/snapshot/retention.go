package snapshot

import (
	"context"
	"fmt"
	"time"
)

// Retention says which snapshots a store keeps. Zero fields keep
// everything they govern.
type Retention struct {
	// Keep is how many of the newest snapshots are kept (0: no limit).
	Keep int
	// MaxAge removes snapshots older than this (0: no limit).
	MaxAge time.Duration
}

// PlanPrune returns the names of the snapshots in ms (any order) that r
// removes at now: all but the Keep newest, and those older than MaxAge.
// The newest snapshot is never removed, however old, so a cluster whose
// snapshots stopped keeps its last one.
func PlanPrune(ms []Meta, r Retention, now time.Time) []string {
	sorted := append([]Meta(nil), ms...)
	SortNewest(sorted)
	var out []string
	for i, m := range sorted {
		if i == 0 {
			continue
		}
		if (r.Keep > 0 && i >= r.Keep) || (r.MaxAge > 0 && now.Sub(m.TakenAt) > r.MaxAge) {
			out = append(out, m.Name)
		}
	}
	return out
}

// Prune lists st, removes what PlanPrune names and returns those names.
func Prune(ctx context.Context, st Store, r Retention, now time.Time) ([]string, error) {
	ms, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	plan := PlanPrune(ms, r, now)
	for i, name := range plan {
		if err := st.Delete(ctx, name); err != nil {
			return plan[:i], fmt.Errorf("snapshot: prune %s: %w", st.Where(), err)
		}
	}
	return plan, nil
}

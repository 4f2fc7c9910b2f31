// Package gossipkey keeps a mesh member's key generation in step with the
// one stored in etcd (api.GossipKey), and rotates it: Rotate increments
// the stored generation; Follow installs it on the member. Members hold the
// keys of generations g-1, g and g+1 (package gossip), so members that
// follow a rotation at different moments keep understanding each other.
//
// RotateSecret replaces the secret the keys derive from: a new random
// secret, sealed to each node's certificate key (Seal, Open) under the
// node's own secrets dir, bound to the next generation; FollowSecret opens
// it on the node and installs it without a restart.
package gossipkey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Keyring is what Follow needs of a mesh member (*gossip.Mesh).
type Keyring interface {
	KeyGeneration() uint64
	SetKeyGeneration(gen uint64) error
}

// Current reads the stored generation (0 when none was ever rotated).
func Current(ctx context.Context, st *store.Store) (*api.GossipKey, error) {
	k := api.NewGossipKey()
	err := st.Get(ctx, store.GossipKeyKey, k)
	if errors.Is(err, store.ErrNotFound) {
		return api.NewGossipKey(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("gossipkey: %w", err)
	}
	return k, nil
}

// Rotate increments the stored generation and returns the new one; keys
// keep deriving from the current secret (RotateSecret replaces it).
func Rotate(ctx context.Context, st *store.Store, by string, now time.Time) (uint64, error) {
	for {
		k, err := Current(ctx, st)
		if err != nil {
			return 0, err
		}
		// The secret stays: its generation and check are kept.
		k.Spec.Generation, k.Spec.RotatedBy, k.Spec.RotatedAt = k.Spec.Generation+1, by, now
		if k.Metadata.Revision == 0 {
			err = st.CreateObject(ctx, k)
		} else {
			err = st.UpdateObject(ctx, k)
		}
		switch {
		case err == nil:
			return k.Spec.Generation, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists):
			continue // rotated concurrently: increment the newer one
		default:
			return 0, fmt.Errorf("gossipkey: rotate: %w", err)
		}
	}
}

// installGeneration moves m to generation gen when it is elsewhere.
func installGeneration(m Keyring, gen uint64, log *slog.Logger) {
	if gen == m.KeyGeneration() {
		return
	}
	if err := m.SetKeyGeneration(gen); err != nil {
		log.Warn("installing the gossip key generation failed", "generation", gen, "err", err)
	}
}

// Follow installs the stored generation on m every interval until ctx ends.
func Follow(ctx context.Context, st *store.Store, m Keyring, interval time.Duration, log *slog.Logger) {
	(&Follower{St: st, M: m, Interval: interval, Log: log}).every(ctx)
}

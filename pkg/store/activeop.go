package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ActiveOp reads the operation in flight (the one ActiveOpKey names) and
// its journal entry at the same revision; nil when none is in flight.
func (s *Store) ActiveOp(ctx context.Context) (*api.Operation, error) {
	resp, err := s.cli.Get(ctx, ActiveOpKey)
	if err != nil {
		return nil, fmt.Errorf("store: active operation: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return s.OpAt(ctx, string(resp.Kvs[0].Value), resp.Header.Revision)
}

// OpAt reads operation name's journal entry at revision rev; an operation
// named active with no entry is an error, not ErrNotFound.
func (s *Store) OpAt(ctx context.Context, name string, rev int64) (*api.Operation, error) {
	op := &api.Operation{}
	err := s.Get(ctx, OpKey(name), op, clientv3.WithRev(rev))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("store: operation %s at revision %d has no journal entry", name, rev)
	}
	if err != nil {
		return nil, fmt.Errorf("store: operation %s at revision %d: %w", name, rev, err)
	}
	return op, nil
}

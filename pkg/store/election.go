package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leader returns the name the oldest campaign under ElectionPrefix holds
// (the coordinators' leader), or "" when nobody campaigns.
func (s *Store) Leader(ctx context.Context) (string, error) {
	resp, err := s.cli.Get(ctx, ElectionPrefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("store: read leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

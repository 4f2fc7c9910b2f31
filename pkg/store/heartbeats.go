package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Alive tells which nodes have a live heartbeat (a key under HeartbeatsDir,
// bound to the node's lease), and the revision it was read at. opts are
// added to the read (clientv3.WithRev reads an earlier revision).
func (s *Store) Alive(ctx context.Context, opts ...clientv3.OpOption) (map[string]bool, int64, error) {
	resp, err := s.cli.Get(ctx, HeartbeatsDir, append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}, opts...)...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: heartbeats: %w", err)
	}
	alive := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		alive[Name(string(kv.Key))] = true
	}
	return alive, resp.Header.Revision, nil
}

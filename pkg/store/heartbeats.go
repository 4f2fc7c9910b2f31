package store

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Alive tells which nodes have a live heartbeat (a key under HeartbeatsDir,
// bound to the node's lease), and the revision it was read at. opts are
// added to the read (clientv3.WithRev reads an earlier revision).
func (s *Store) Alive(ctx context.Context, opts ...clientv3.OpOption) (map[string]bool, int64, error) {
	resp, err := s.cli.Get(ctx, HeartbeatsDir, aliveOpts(opts)...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: heartbeats: %w", err)
	}
	return AliveIn(resp.Kvs), resp.Header.Revision, nil
}

// AliveOp is Alive's read as an operation of a transaction (Txn), for a
// caller that reads the heartbeats at one revision with other ranges;
// AliveIn decodes its result.
func AliveOp(opts ...clientv3.OpOption) clientv3.Op {
	return clientv3.OpGet(HeartbeatsDir, aliveOpts(opts)...)
}

// AliveIn tells which nodes the heartbeat keys kvs (AliveOp's result) are
// of.
func AliveIn(kvs []*mvccpb.KeyValue) map[string]bool {
	alive := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		alive[Name(string(kv.Key))] = true
	}
	return alive
}

func aliveOpts(opts []clientv3.OpOption) []clientv3.OpOption {
	return append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}, opts...)
}

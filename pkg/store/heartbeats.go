package store

import (
	"context"
	"fmt"
	"time"

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
// of: the set of their names.
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

// HeartbeatLease returns the lease node's heartbeat key is bound to;
// ok is false when the node has no heartbeat.
func (s *Store) HeartbeatLease(ctx context.Context, node string) (lease clientv3.LeaseID, ok bool, err error) {
	resp, err := s.cli.Get(ctx, HeartbeatKey(node))
	if err != nil {
		return 0, false, fmt.Errorf("store: heartbeat of %s: %w", node, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), true, nil
}

// PutHeartbeat writes node's heartbeat key, bound to lease, with the time
// it was written; it is gone when the lease ends. An error wraps etcd's
// (rpctypes.ErrLeaseNotFound for a lease that ended).
func (s *Store) PutHeartbeat(ctx context.Context, node string, at time.Time, lease clientv3.LeaseID) error {
	if _, err := s.cli.Do(ctx, HeartbeatOp(node, at, lease)); err != nil {
		return fmt.Errorf("store: heartbeat of %s: %w", node, err)
	}
	return nil
}

// HeartbeatOp is PutHeartbeat as an operation, to write along others in
// one transaction.
func HeartbeatOp(node string, at time.Time, lease clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(HeartbeatKey(node), at.UTC().Format(time.RFC3339Nano), clientv3.WithLease(lease))
}

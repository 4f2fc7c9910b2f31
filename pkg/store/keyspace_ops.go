package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DeleteDirOp deletes every key under dir in a transaction.
func DeleteDirOp(dir string) clientv3.Op { return clientv3.OpDelete(dir, clientv3.WithPrefix()) }

// PutLeasedOp is PutValueOp bound to lease: the key is gone when the
// lease ends.
func PutLeasedOp(key, value string, lease clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(key, value, clientv3.WithLease(lease))
}

// ModRevision reads the revision of key's last write without its value;
// ErrNotFound when it is absent.
func (s *Store) ModRevision(ctx context.Context, key string) (int64, error) {
	resp, err := s.cli.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return resp.Kvs[0].ModRevision, nil
}

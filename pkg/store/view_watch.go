package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchDir reports the changes of every key under dir ("" the whole
// keyspace) from revision rev on (0: from now). The channel closes when
// ctx ends or the watch fails: the caller reads again and watches anew.
func (s *Store) WatchDir(ctx context.Context, dir string, rev int64) clientv3.WatchChan {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return s.cli.Watch(ctx, dir, opts...)
}

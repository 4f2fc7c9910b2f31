package store

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReadSpan reads every key in [start, end), which may span several
// directories, in key order, and the revision it was read at.
func (s *Store) ReadSpan(ctx context.Context, start, end string) ([]*mvccpb.KeyValue, int64, error) {
	resp, err := s.cli.Get(ctx, start, clientv3.WithRange(end))
	if err != nil {
		return nil, 0, fmt.Errorf("store: read %s..%s: %w", start, end, err)
	}
	return resp.Kvs, resp.Header.Revision, nil
}

// WatchSpan reports the changes of every key in [start, end) from
// revision rev on (0: from now), each event with the key's previous
// value (PrevKv) when etcd still holds it. The channel closes when ctx
// ends or the watch fails: the caller reads again (ReadSpan) and watches
// from what it read.
func (s *Store) WatchSpan(ctx context.Context, start, end string, rev int64) clientv3.WatchChan {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithPrevKV()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return s.cli.Watch(ctx, start, opts...)
}

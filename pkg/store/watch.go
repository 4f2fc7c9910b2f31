package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watcher watches keys: a Store's client (Store.Client, scoped to its
// prefix), or a wrapper of it that injects faults in tests.
type Watcher interface {
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
}

// Getter reads keys: a Store's client, or a wrapper of it.
type Getter interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
}

// WatchRange reports the changes of range r (a Key, or every key under a
// Dir or DirKeys) through w, from revision rev on (0: from now). The
// channel closes when ctx ends or the watch fails (a compacted rev, a lost
// member): the caller reads again and watches from what it read.
func WatchRange(ctx context.Context, w Watcher, r Range, rev int64) clientv3.WatchChan {
	return w.Watch(ctx, r.key, r.watchOpts(rev)...)
}

// WatchRangeCreated is WatchRange whose first response tells that the
// watch is in place (WatchResponse.Created), with the revision it started
// at in its header.
func WatchRangeCreated(ctx context.Context, w Watcher, r Range, rev int64) clientv3.WatchChan {
	return w.Watch(ctx, r.key, append(r.watchOpts(rev), clientv3.WithCreatedNotify())...)
}

func (r Range) watchOpts(rev int64) []clientv3.OpOption {
	var opts []clientv3.OpOption
	if r.dir {
		opts = append(opts, clientv3.WithPrefix())
	}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return opts
}

// CurrentRevision reads the revision of the store g reads (counting key,
// reading no value).
func CurrentRevision(ctx context.Context, g Getter, key string) (int64, error) {
	resp, err := g.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("store: read the current revision: %w", err)
	}
	return resp.Header.Revision, nil
}

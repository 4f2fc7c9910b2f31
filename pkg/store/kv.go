package store

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GetKV reads key as it is stored, for values that are not plain JSON
// objects (package secrets seals them); ErrNotFound when it is absent.
// opts are added to the read (clientv3.WithRev reads an earlier revision).
func (s *Store) GetKV(ctx context.Context, key string, opts ...clientv3.OpOption) (*mvccpb.KeyValue, error) {
	resp, err := s.cli.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return resp.Kvs[0], nil
}

// ListKVs reads every key under dir as stored, in key order, and the
// revision the list was read at.
func (s *Store) ListKVs(ctx context.Context, dir string) ([]*mvccpb.KeyValue, int64, error) {
	resp, err := s.cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("store: list %s: %w", dir, err)
	}
	return resp.Kvs, resp.Header.Revision, nil
}

// Txn applies ops in one transaction when every cmp holds, and returns its
// response; ErrConflict when a comparison failed (nothing was applied).
// With no cmps and only reads it is a read of several ranges at one
// revision. Writes the coordinator decides go through FencedTxn instead.
func (s *Store) Txn(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: txn: %w", err)
	}
	if !resp.Succeeded {
		return resp, fmt.Errorf("%w: txn", ErrConflict)
	}
	return resp, nil
}

// TxnElse applies then when every cmp holds and els otherwise, in one
// transaction, and returns its response: Succeeded tells which ran. It
// lets a write that holds in the usual case read, in the same round trip,
// what the caller needs when it does not.
func (s *Store) TxnElse(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: txn: %w", err)
	}
	return resp, nil
}

// Revision reads the store's current revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, ActiveOpKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("store: read revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// Watch reports the changes of key from revision rev on (0: from now). The
// channel closes when ctx ends or the watch fails (a compacted rev, a lost
// member): the caller reads again and watches from what it read. Watches
// of controllers belong to package controller's runtime, not here.
func (s *Store) Watch(ctx context.Context, key string, rev int64) clientv3.WatchChan {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return s.cli.Watch(ctx, key, opts...)
}

// Names lists the names (the last element, Name) of the keys under dir,
// reading keys only.
func (s *Store) Names(ctx context.Context, dir string) (map[string]bool, error) {
	resp, err := s.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", dir, err)
	}
	return AliveIn(resp.Kvs), nil
}

// LastChange is the newest mod revision of a key under dir: the revision
// of its last write there that still stands (a deletion is not seen); 0
// when dir is empty.
func (s *Store) LastChange(ctx context.Context, dir string) (int64, error) {
	resp, err := s.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("store: last change under %s: %w", dir, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
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

package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ValueUnscoped reads, as stored, key of the keyspace under prefix
// through cli, a client New has not scoped: one its owner goes on using
// with whole keys (package restore's client of the live cluster), which
// New would take over. ok is false when key is absent.
func ValueUnscoped(ctx context.Context, cli *clientv3.Client, prefix, key string) (value []byte, ok bool, err error) {
	resp, err := cli.Get(ctx, prefix+key)
	if err != nil {
		return nil, false, fmt.Errorf("store: get %s%s: %w", prefix, key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

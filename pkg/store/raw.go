package store

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GetUnder reads key of nico's keyspace under prefix through g, a client
// no Store scopes (one dialled for a single read, which New must not take
// over); kv is nil when the key is absent. rev is the revision it was
// read at.
func GetUnder(ctx context.Context, g Getter, prefix, key string) (kv *mvccpb.KeyValue, rev int64, err error) {
	return getUnder(ctx, g, prefix+key)
}

// GetUnderLocal is GetUnder answered by the member g dials alone, without
// a quorum (a serializable read): for a cluster that lost its quorum. It
// may miss the newest writes.
func GetUnderLocal(ctx context.Context, g Getter, prefix, key string) (kv *mvccpb.KeyValue, rev int64, err error) {
	return getUnder(ctx, g, prefix+key, clientv3.WithSerializable())
}

// GetThrough reads key as g names it: under the prefix of the Store whose
// client g is, the whole key through a client no Store scopes. kv is nil
// when the key is absent; rev is the revision it was read at.
func GetThrough(ctx context.Context, g Getter, key string) (kv *mvccpb.KeyValue, rev int64, err error) {
	return getUnder(ctx, g, key)
}

func getUnder(ctx context.Context, g Getter, key string, opts ...clientv3.OpOption) (*mvccpb.KeyValue, int64, error) {
	resp, err := g.Get(ctx, key, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	return resp.Kvs[0], resp.Header.Revision, nil
}

// CountAll counts every key of the cluster g reads (all of etcd when g is
// not scoped), reading no value, and the revision it counted at.
func CountAll(ctx context.Context, g Getter) (count, rev int64, err error) {
	resp, err := g.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("store: count keys: %w", err)
	}
	return resp.Count, resp.Header.Revision, nil
}

// DeleteRawPrefix deletes every key under prefix through cli's
// connection, outside any Store's prefix even when New scoped cli: for
// data that is not nico's (a Kubernetes cluster's own keys in nico's
// etcd). Deleting nothing is not an error.
func DeleteRawPrefix(ctx context.Context, cli *clientv3.Client, prefix string) error {
	kv := clientv3.NewKVFromKVClient(pb.NewKVClient(cli.ActiveConnection()), cli)
	if _, err := kv.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("store: delete %s: %w", prefix, err)
	}
	return nil
}

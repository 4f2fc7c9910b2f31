package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Answers tells whether the cluster cli reaches serves a linearizable
// read: it reads the key "health", outside nico's keyspace, as etcdctl's
// endpoint health does. It probes a client before a Store is made of it.
func Answers(ctx context.Context, cli *clientv3.Client) error {
	_, err := CurrentRevision(ctx, cli, "health")
	return err
}

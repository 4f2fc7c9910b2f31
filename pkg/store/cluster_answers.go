package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Answers tells whether the cluster cli reaches serves a linearizable
// read: it reads the key "health", outside nico's keyspace, as etcdctl's
// endpoint health does. It probes a client before a Store is made of it.
func Answers(ctx context.Context, cli *clientv3.Client) error {
	if _, err := cli.Get(ctx, "health"); err != nil {
		return fmt.Errorf("store: read health: %w", err)
	}
	return nil
}

// Package store is the one way into nico's keyspace: versioned JSON objects
// under one etcd prefix, read and written with compare-and-swap helpers and,
// for the coordinator's decisions, leader-fenced transactions.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
)

// DefaultPrefix is where nico keeps everything unless configured otherwise.
const DefaultPrefix = "/nico/v1/"

// Sentinel errors.
var (
	ErrNotFound = errors.New("store: not found")
	ErrExists   = errors.New("store: already exists")
	ErrConflict = errors.New("store: changed since read")
	// ErrNotLeader means a fenced write was refused because the writer's
	// leadership key is gone or was replaced: it is no longer leader.
	ErrNotLeader = errors.New("store: not the leader")
)

// Store reads and writes nico's objects under a prefix.
type Store struct {
	cli    *clientv3.Client
	prefix string
}

// New scopes cli to prefix and returns a Store over it. It takes cli over:
// from then on cli's KV, Watcher and Lease see only keys under prefix, so
// that sessions and elections made from cli live there too.
func New(cli *clientv3.Client, prefix string) (*Store, error) {
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("store: prefix %q: must start and end with \"/\"", prefix)
	}
	cli.KV = namespace.NewKV(cli.KV, prefix)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, prefix)
	cli.Lease = namespace.NewLease(cli.Lease, prefix)
	return &Store{cli: cli, prefix: prefix}, nil
}

// Client returns the scoped client (its Cluster and Maintenance APIs are not
// scoped).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the keyspace prefix.
func (s *Store) Prefix() string { return s.prefix }

// Get reads key into obj and records its revision in obj's metadata. opts
// are added to the read (clientv3.WithRev reads an earlier revision).
func (s *Store) Get(ctx context.Context, key string, obj api.Object, opts ...clientv3.OpOption) error {
	kv, err := s.GetKV(ctx, key, opts...)
	if err != nil {
		return err
	}
	return decode(kv.Key, kv.Value, kv.ModRevision, obj)
}

// List reads every object under dir (a key prefix such as NodesDir) in key
// order, and the revision the list was read at.
func List[T any, PT interface {
	*T
	api.Object
}](ctx context.Context, s *Store, dir string) ([]PT, int64, error) {
	kvs, rev, err := s.ListKVs(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	out, err := Objects[T, PT](kvs)
	if err != nil {
		return nil, 0, err
	}
	return out, rev, nil
}

// Create writes obj at key only if nothing is there.
func (s *Store) Create(ctx context.Context, key string, obj api.Object, opts ...clientv3.OpOption) error {
	op, err := PutOp(key, obj, opts...)
	if err != nil {
		return err
	}
	resp, err := s.cli.Txn(ctx).If(Absent(key)).Then(op).Commit()
	if err != nil {
		return fmt.Errorf("store: create %s: %w", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	obj.GetMetadata().Revision = resp.Header.Revision
	return nil
}

// Update writes obj at key only if the key is still at the revision obj was
// read at (compare-and-swap).
func (s *Store) Update(ctx context.Context, key string, obj api.Object) error {
	op, err := PutOp(key, obj)
	if err != nil {
		return err
	}
	resp, err := s.cli.Txn(ctx).If(Unchanged(key, obj.GetMetadata().Revision)).Then(op).Commit()
	if err != nil {
		return fmt.Errorf("store: update %s: %w", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", ErrConflict, key)
	}
	obj.GetMetadata().Revision = resp.Header.Revision
	return nil
}

// Put writes obj at key unconditionally.
func (s *Store) Put(ctx context.Context, key string, obj api.Object, opts ...clientv3.OpOption) error {
	op, err := PutOp(key, obj, opts...)
	if err != nil {
		return err
	}
	resp, err := s.cli.Do(ctx, op)
	if err != nil {
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	obj.GetMetadata().Revision = resp.Put().Header.Revision
	return nil
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.cli.Delete(ctx, key); err != nil {
		return fmt.Errorf("store: delete %s: %w", key, err)
	}
	return nil
}

// PutOp encodes obj as a put operation for a transaction.
func PutOp(key string, obj api.Object, opts ...clientv3.OpOption) (clientv3.Op, error) {
	tm := obj.GetTypeMeta()
	if tm.APIVersion == "" || tm.Kind == "" {
		return clientv3.Op{}, fmt.Errorf("store: put %s: object has no apiVersion/kind", key)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("store: encode %s: %w", key, err)
	}
	return clientv3.OpPut(key, string(b), opts...), nil
}

// Absent is a comparison that holds when key does not exist.
func Absent(key string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
}

// Unchanged is a comparison that holds when key is still at revision rev
// (rev 0: still absent).
func Unchanged(key string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

func decode(key, value []byte, rev int64, obj api.Object) error {
	if err := json.Unmarshal(value, obj); err != nil {
		return fmt.Errorf("store: decode %s: %w", key, err)
	}
	// A deprecated apiVersion (api.DeprecatedGroup) is read as the current
	// one, so the object is rewritten with it when next written.
	if _, err := api.UpgradeAPIVersions(obj); err != nil {
		return fmt.Errorf("store: %s: %w", key, err)
	}
	obj.GetMetadata().Revision = rev
	return nil
}

// Name returns the last element of a key.
func Name(key string) string { return path.Base(key) }

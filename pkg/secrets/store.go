// Package secrets keeps objects under store.SecretsDir sealed with the
// cluster's secrets key (package secretbox): a plain etcd client, even one
// allowed to read the range, sees ciphertext. The store key of a value is
// its additional data, so a sealed value copied to another key does not
// open.
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotSecret is returned for a key outside store.SecretsDir: only that
// range is sealed (and, with etcd auth, readable by few).
var ErrNotSecret = errors.New("secrets: key outside " + store.SecretsDir)

// Store reads and writes sealed objects through a store.Store.
type Store struct {
	st  *store.Store
	box *secretbox.Box
	// fence, when set, is the leader's term every write is fenced on.
	fence *store.Fence
}

// New returns a Store sealing with box.
func New(st *store.Store, box *secretbox.Box) *Store { return &Store{st: st, box: box} }

// Fenced returns a view of s whose writes (Put, Create, CreateIf, Update,
// Delete, DeleteUnchanged) commit only while f holds, as the coordinator
// leader's other writes (store.FencedTxn): a deposed leader's write is
// refused with store.ErrNotLeader and changes nothing. Reads are s's.
func (s *Store) Fenced(f store.Fence) *Store {
	c := *s
	c.fence = &f
	return &c
}

// txn applies ops if every cmp holds (store.ErrConflict otherwise), and,
// on a fenced view, only while the fence holds (store.ErrNotLeader).
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if s.fence == nil {
		return s.st.Txn(ctx, cmps, ops...)
	}
	guards := make([]store.Guard, len(cmps))
	for i, c := range cmps {
		guards[i] = store.Guard{Cmp: c, Err: store.ErrConflict}
	}
	return s.st.FencedTxn(ctx, *s.fence, guards, ops...)
}

// Get reads key into obj and records its revision in obj's metadata.
// Missing: store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string, obj api.Object) error {
	if err := secretKey(key); err != nil {
		return err
	}
	kv, err := s.st.GetKV(ctx, key)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return s.decode(key, kv.Value, kv.ModRevision, obj)
}

// List reads every object under dir, in key order, and the revision the
// list was read at.
func List[T any, PT interface {
	*T
	api.Object
}](ctx context.Context, s *Store, dir string) ([]PT, int64, error) {
	if err := secretKey(dir); err != nil {
		return nil, 0, err
	}
	kvs, rev, err := s.st.ListKVs(ctx, dir)
	if err != nil {
		return nil, 0, fmt.Errorf("secrets: %w", err)
	}
	out := make([]PT, 0, len(kvs))
	for _, kv := range kvs {
		obj := PT(new(T))
		if err := s.decode(string(kv.Key), kv.Value, kv.ModRevision, obj); err != nil {
			return nil, 0, err
		}
		out = append(out, obj)
	}
	return out, rev, nil
}

// Put writes obj at its key (store.KeyOf) unconditionally.
func (s *Store) Put(ctx context.Context, obj api.Object) error {
	return s.write(ctx, "put", obj, func(string) []clientv3.Cmp { return nil })
}

// Create writes obj at its key only if nothing is there (store.ErrExists).
func (s *Store) Create(ctx context.Context, obj api.Object) error {
	return s.CreateIf(ctx, obj)
}

// CreateIf writes obj at its key only if nothing is there and every cmp
// holds (store.ErrExists otherwise).
func (s *Store) CreateIf(ctx context.Context, obj api.Object, cmps ...clientv3.Cmp) error {
	return s.write(ctx, "create", obj, func(key string) []clientv3.Cmp { return append([]clientv3.Cmp{store.Absent(key)}, cmps...) })
}

// DeleteUnchanged removes obj's key only if it is still at the revision
// obj was read at, and applies also (plain operations) in the same
// transaction; store.ErrConflict when the key changed or is gone.
func (s *Store) DeleteUnchanged(ctx context.Context, obj api.Object, also ...clientv3.Op) error {
	key, err := s.keyOf(obj)
	if err != nil {
		return err
	}
	_, err = s.txn(ctx, []clientv3.Cmp{store.Unchanged(key, obj.GetMetadata().Revision)}, append([]clientv3.Op{store.DeleteOp(key)}, also...)...)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %s", store.ErrConflict, key)
	}
	if err != nil {
		return fmt.Errorf("secrets: delete %s: %w", key, err)
	}
	return nil
}

// Update writes obj at its key only if the key is still at the revision
// obj was read at (store.ErrConflict).
func (s *Store) Update(ctx context.Context, obj api.Object) error {
	return s.write(ctx, "update", obj, func(key string) []clientv3.Cmp {
		return []clientv3.Cmp{store.Unchanged(key, obj.GetMetadata().Revision)}
	})
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := secretKey(key); err != nil {
		return err
	}
	if s.fence != nil {
		if _, err := s.txn(ctx, nil, store.DeleteOp(key)); err != nil {
			return fmt.Errorf("secrets: delete %s: %w", key, err)
		}
		return nil
	}
	if err := s.st.Delete(ctx, key); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}

func (s *Store) write(ctx context.Context, verb string, obj api.Object, cmpsAt func(key string) []clientv3.Cmp) error {
	key, err := s.keyOf(obj)
	if err != nil {
		return err
	}
	tm := obj.GetTypeMeta()
	if tm.APIVersion == "" || tm.Kind == "" {
		return fmt.Errorf("secrets: %s %s: object has no apiVersion/kind", verb, key)
	}
	plain, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("secrets: encode %s: %w", key, err)
	}
	sealed, err := s.box.Seal(key, plain)
	if err != nil {
		return err
	}
	resp, err := s.txn(ctx, cmpsAt(key), store.PutValueOp(key, string(sealed)))
	switch {
	case errors.Is(err, store.ErrConflict) && verb == "create":
		return fmt.Errorf("%w: %s", store.ErrExists, key)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %s", store.ErrConflict, key)
	case err != nil:
		return fmt.Errorf("secrets: %s %s: %w", verb, key, err)
	}
	obj.GetMetadata().Revision = resp.Header.Revision
	return nil
}

func (s *Store) decode(key string, value []byte, rev int64, obj api.Object) error {
	plain, err := s.box.Open(key, value)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if err := json.Unmarshal(plain, obj); err != nil {
		// The JSON error could quote the plaintext: say only where.
		return fmt.Errorf("secrets: decode %s: not a valid object", key)
	}
	if _, err := api.UpgradeAPIVersions(obj); err != nil {
		return fmt.Errorf("secrets: %s: %w", key, err)
	}
	obj.GetMetadata().Revision = rev
	return nil
}

// keyOf is obj's key (store.KeyOf), which must be a secret's.
func (s *Store) keyOf(obj api.Object) (string, error) {
	key, err := store.KeyOf(obj)
	if err != nil {
		return "", fmt.Errorf("secrets: %w", err)
	}
	return key, secretKey(key)
}

func secretKey(key string) error {
	if !strings.HasPrefix(key, store.SecretsDir) {
		return fmt.Errorf("%w: %s", ErrNotSecret, key)
	}
	return nil
}

package store

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Range names what a View reads: one key, or every key under a
// directory, with or without the values.
type Range struct {
	key      string
	dir      bool
	keysOnly bool
}

// Key is the range of one key.
func Key(key string) Range { return Range{key: key} }

// Dir is the range of every key under dir, with its value.
func Dir(dir string) Range { return Range{key: dir, dir: true} }

// DirKeys is the range of every key under dir without the values: its
// names and revisions (and leases) only.
func DirKeys(dir string) Range { return Range{key: dir, dir: true, keysOnly: true} }

func (r Range) String() string {
	switch {
	case r.keysOnly:
		return r.key + "* (keys)"
	case r.dir:
		return r.key + "*"
	}
	return r.key
}

func (r Range) op(rev int64) clientv3.Op {
	var opts []clientv3.OpOption
	if r.dir {
		opts = append(opts, clientv3.WithPrefix())
	}
	if r.keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return clientv3.OpGet(r.key, opts...)
}

// A View is what several Ranges held at one revision: the observation a
// controller plans from. Its accessors name the range, never a position.
type View struct {
	// Rev is the revision every range was read at.
	Rev int64
	kvs map[Range][]*mvccpb.KeyValue
}

// View reads every range at one revision, the newest.
func (s *Store) View(ctx context.Context, ranges ...Range) (*View, error) {
	return s.ViewAt(ctx, 0, ranges...)
}

// ViewAt reads every range at revision rev (0: the newest); a compacted
// rev is etcd's error.
func (s *Store) ViewAt(ctx context.Context, rev int64, ranges ...Range) (*View, error) {
	ops := make([]clientv3.Op, len(ranges))
	for i, r := range ranges {
		ops[i] = r.op(rev)
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: read %v: %w", ranges, err)
	}
	v := &View{Rev: resp.Header.Revision, kvs: make(map[Range][]*mvccpb.KeyValue, len(ranges))}
	if rev > 0 {
		v.Rev = rev
	}
	for i, r := range ranges {
		v.kvs[r] = resp.Responses[i].GetResponseRange().GetKvs()
	}
	return v, nil
}

// KVs returns what range r held, in key order. Asking for a range the
// view did not read is a programming error: it panics.
func (v *View) KVs(r Range) []*mvccpb.KeyValue {
	kvs, ok := v.kvs[r]
	if !ok {
		panic(fmt.Sprintf("store: view has no range %v", r))
	}
	return kvs
}

// Has tells whether the key of range Key(key) exists.
func (v *View) Has(key string) bool { return len(v.KVs(Key(key))) > 0 }

// Value returns the stored value of Key(key); nil when absent.
func (v *View) Value(key string) []byte {
	if kvs := v.KVs(Key(key)); len(kvs) > 0 {
		return kvs[0].Value
	}
	return nil
}

// Names returns the names (Name) of the keys range r held.
func (v *View) Names(r Range) map[string]bool { return AliveIn(v.KVs(r)) }

// Decode decodes Key(key) into obj; false when it is absent.
func (v *View) Decode(key string, obj api.Object) (bool, error) {
	kvs := v.KVs(Key(key))
	if len(kvs) == 0 {
		return false, nil
	}
	return true, Decode(kvs[0], obj)
}

// ViewObjects decodes the objects Dir(dir) held in view v.
func ViewObjects[T any, PT interface {
	*T
	api.Object
}](v *View, dir string) ([]PT, error) {
	return Objects[T, PT](v.KVs(Dir(dir)))
}

package store

import (
	"reflect"

	"github.com/homystack/nico/pkg/api"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Objects decodes kvs, as a range read returned them, into objects with
// their revisions recorded: List for a read the caller made itself (one
// of several in a transaction, or at a chosen revision). A value decoded
// before at the same key is copied rather than parsed again (decoded.go).
func Objects[T any, PT interface {
	*T
	api.Object
}](kvs []*mvccpb.KeyValue) ([]PT, error) {
	out := make([]PT, 0, len(kvs))
	for _, kv := range kvs {
		obj := PT(new(T))
		v := reflect.ValueOf(obj)
		if decoded.get(kv.Key, kv.Value, v) {
			obj.GetMetadata().Revision = kv.ModRevision
		} else {
			if err := decode(kv.Key, kv.Value, kv.ModRevision, obj); err != nil {
				return nil, err
			}
			decoded.put(kv.Key, kv.Value, v)
		}
		out = append(out, obj)
	}
	return out, nil
}

// Decode decodes one key-value into obj and records its revision.
func Decode(kv *mvccpb.KeyValue, obj api.Object) error {
	return decode(kv.Key, kv.Value, kv.ModRevision, obj)
}

package store

import (
	"bytes"
	"reflect"
	"sync"
)

// decoded keeps the objects Objects decoded, by type and key, beside the
// bytes they were decoded from. A controller pass reads whole directories
// (every Node, every NixosConfiguration) and most of their values have not
// changed since the last pass: such a value is copied from what was decoded
// before rather than parsed again. A hit needs the same bytes, so what a
// reader gets never depends on revisions or on which etcd the bytes came
// from; each reader gets its own deep copy (clone.go) to change as it likes.
type decodedCache struct {
	mu sync.Mutex
	m  map[reflect.Type]map[string]decodedValue
	n  int
}

type decodedValue struct {
	raw []byte
	obj reflect.Value // a *T never handed out
}

// maxDecoded bounds the cache: past it, the cache starts over. A fleet of a
// thousand machines keeps a few thousand objects in the directories its
// controllers read whole.
const maxDecoded = 1 << 15

var decoded = decodedCache{m: map[reflect.Type]map[string]decodedValue{}}

// get copies the object decoded from raw at key into dst (a *T) and
// reports whether there was one. What the cache holds is never changed
// after put, so it is copied outside the lock.
func (c *decodedCache) get(key []byte, raw []byte, dst reflect.Value) bool {
	c.mu.Lock()
	v, ok := c.m[dst.Type()][string(key)]
	c.mu.Unlock()
	if !ok || !bytes.Equal(v.raw, raw) {
		return false
	}
	deepCopy(dst.Elem(), v.obj.Elem())
	return true
}

// put keeps a copy of src (a *T, just decoded from raw at key).
func (c *decodedCache) put(key []byte, raw []byte, src reflect.Value) {
	obj := reflect.New(src.Type().Elem())
	deepCopy(obj.Elem(), src.Elem())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= maxDecoded {
		c.m, c.n = map[reflect.Type]map[string]decodedValue{}, 0
	}
	byKey := c.m[src.Type()]
	if byKey == nil {
		byKey = map[string]decodedValue{}
		c.m[src.Type()] = byKey
	}
	if _, ok := byKey[string(key)]; !ok {
		c.n++
	}
	byKey[string(key)] = decodedValue{raw: bytes.Clone(raw), obj: obj}
}

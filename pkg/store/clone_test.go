package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// cloned are the kinds whose copies the tests check field by field: what a
// new field's type needs from deepCopy shows up here.
func cloned() []api.Object {
	return []api.Object{
		&api.Node{}, &api.NixosConfiguration{}, &api.Rollout{}, &api.Operation{},
		&api.EtcdCluster{}, &api.KubernetesCluster{}, &api.Machine{}, &api.MachinePool{},
		&api.MachineClaim{}, &api.Liveness{}, &api.Secret{}, &api.FlakeObjects{},
		&api.JoinRequest{}, &api.SwitchRequest{}, &api.DrainRequest{}, &api.ComponentReport{},
	}
}

func TestDeepCopySharesNothing(t *testing.T) {
	for _, obj := range cloned() {
		t.Run(reflect.TypeOf(obj).Elem().Name(), func(t *testing.T) {
			src := reflect.New(reflect.TypeOf(obj).Elem())
			fill(src.Elem(), new(int))
			want := reflect.New(src.Type().Elem())
			fill(want.Elem(), new(int))

			dst := reflect.New(src.Type().Elem())
			deepCopy(dst.Elem(), src.Elem())
			if !reflect.DeepEqual(dst.Interface(), src.Interface()) {
				t.Fatalf("the copy differs from its source:\n got %+v\nwant %+v", dst.Interface(), src.Interface())
			}
			scribble(dst.Elem())
			if reflect.DeepEqual(dst.Interface(), src.Interface()) {
				t.Fatal("scribble changed nothing: the test would not see shared memory")
			}
			if !reflect.DeepEqual(src.Interface(), want.Interface()) {
				t.Fatalf("changing the copy changed its source:\n got %+v\nwant %+v", src.Interface(), want.Interface())
			}
		})
	}
}

func TestDeepCopyKeepsNilAndEmpty(t *testing.T) {
	type inner struct{ N int }
	type v struct {
		NilSlice   []string
		EmptySlice []string
		NilMap     map[string]int
		EmptyMap   map[string]int
		NilPtr     *inner
		Any        any
		At         time.Time
	}
	src := v{EmptySlice: []string{}, EmptyMap: map[string]int{}, Any: []int{1}, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	var dst v
	deepCopy(reflect.ValueOf(&dst).Elem(), reflect.ValueOf(src))
	if !reflect.DeepEqual(dst, src) {
		t.Fatalf("got %#v, want %#v", dst, src)
	}
	dst.Any.([]int)[0] = 2
	if src.Any.([]int)[0] != 1 {
		t.Fatal("the copy of an interface's slice shares its source's array")
	}
}

// TestObjectsCopiesWhatItDecodedBefore reads the same bytes twice: the
// second read comes from the cache, equals a fresh decode, and is the
// caller's own; changed bytes at the same key are decoded anew.
func TestObjectsCopiesWhatItDecodedBefore(t *testing.T) {
	n := api.NewNode("cache-a")
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.Labels = map[string]string{"rack": "r1"}
	n.Status.DataDir = &api.DataDirStatus{FreeBytes: 1 << 30}
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	kv := func(value []byte, rev int64) []*mvccpb.KeyValue {
		return []*mvccpb.KeyValue{{Key: []byte("nodes/cache-a"), Value: value, ModRevision: rev}}
	}
	first, err := Objects[api.Node](kv(raw, 7))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Objects[api.Node](kv(raw, 9))
	if err != nil {
		t.Fatal(err)
	}
	fresh := &api.Node{}
	if err := decode([]byte("nodes/cache-a"), raw, 9, fresh); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second[0], fresh) {
		t.Fatalf("a cached read differs from a fresh decode:\n got %+v\nwant %+v", second[0], fresh)
	}
	if second[0].Metadata.Revision != 9 {
		t.Fatalf("a cached read has revision %d, want the key-value's 9", second[0].Metadata.Revision)
	}
	scribble(reflect.ValueOf(first[0]).Elem())
	third, err := Objects[api.Node](kv(raw, 9))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(third[0], fresh) {
		t.Fatalf("a caller's change to what it read reached a later read:\n got %+v\nwant %+v", third[0], fresh)
	}

	n.Spec.Labels["rack"] = "r2"
	changed, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Objects[api.Node](kv(changed, 10))
	if err != nil {
		t.Fatal(err)
	}
	if r := got[0].Spec.Labels["rack"]; r != "r2" {
		t.Fatalf("new bytes at a cached key read rack %q, want r2", r)
	}
}

// fill gives every exported field of v a value that is not zero, numbered
// from *seed: two fills from the same seed are equal.
func fill(v reflect.Value, seed *int) {
	*seed++
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Unix(int64(*seed), 0).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), seed)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), seed)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, seed)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(map[string]any{"k": []any{fmt.Sprint(*seed)}}))
		}
	case reflect.String:
		v.SetString(fmt.Sprint("s", *seed))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*seed % 100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*seed % 100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*seed))
	}
}

// scribble changes v in place, through every map, slice, pointer and
// interface it holds, never by replacing one.
func scribble(v reflect.Value) {
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour)))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		it := v.MapRange()
		var keys []reflect.Value
		for it.Next() {
			keys = append(keys, it.Key())
		}
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scribble(e)
			v.SetMapIndex(k, e)
		}
		if v.Type().Key().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.New(v.Type().Elem()).Elem())
		}
	case reflect.Interface:
		if !v.IsNil() {
			// The interface's value is not settable: change a copy and
			// put it in the interface's place.
			e := reflect.New(v.Elem().Type()).Elem()
			e.Set(v.Elem())
			scribble(e)
			v.Set(e)
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

func TestDeepCopyOfATypeThatHoldsItself(t *testing.T) {
	type tree struct {
		Name     string
		Children []*tree
		Index    map[string]*tree
	}
	leaf := &tree{Name: "leaf"}
	src := &tree{Name: "root", Children: []*tree{leaf}, Index: map[string]*tree{"leaf": leaf}}
	dst := &tree{}
	deepCopy(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem())
	if !reflect.DeepEqual(dst, src) {
		t.Fatalf("got %+v, want %+v", dst, src)
	}
	dst.Children[0].Name = "changed"
	if leaf.Name != "leaf" {
		t.Fatal("the copy shares its source's children")
	}
}

func TestDecodedCacheIsBounded(t *testing.T) {
	c := decodedCache{m: map[reflect.Type]map[string]decodedValue{}}
	raw := []byte(`{"kind":"Node","metadata":{"name":"a"}}`)
	n := reflect.ValueOf(&api.Node{})
	for i := range maxDecoded + 10 {
		c.put([]byte(fmt.Sprint("nodes/", i)), raw, n)
	}
	if c.n > maxDecoded {
		t.Fatalf("the cache holds %d objects, more than its bound %d", c.n, maxDecoded)
	}
	if !c.get([]byte(fmt.Sprint("nodes/", maxDecoded+9)), raw, reflect.ValueOf(&api.Node{})) {
		t.Fatal("the object put last is not in the cache")
	}
}

package store

import (
	"reflect"
	"sync"
)

// deepCopy sets dst, a settable value of src's type, to a copy of src that
// shares no memory a caller could change: maps, slices, pointers and
// interfaces are copied all the way down; nil stays nil and empty stays
// empty. A struct's unexported fields (time.Time's) are copied as they
// are: they are what the struct's methods treat as immutable.
func deepCopy(dst, src reflect.Value) {
	copierOf(src.Type())(dst, src)
}

// copier copies src into dst, values of the type it was made for.
type copier func(dst, src reflect.Value)

// copiers holds each type's copier, made once; copiersMu serializes
// their making.
var (
	copiers   sync.Map // reflect.Type -> copier
	copiersMu sync.Mutex
)

func copierOf(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	copiersMu.Lock()
	defer copiersMu.Unlock()
	return build(t, map[reflect.Type]*copier{})
}

// build makes t's copier and the copiers it uses. A type that holds itself
// (through a pointer, slice or map) reaches its own copier through
// building while it is being made; no copier is published unfinished.
func build(t reflect.Type, building map[reflect.Type]*copier) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	if p, ok := building[t]; ok {
		return func(dst, src reflect.Value) { (*p)(dst, src) }
	}
	if !deep(t) {
		copiers.Store(t, copier(setValue))
		return setValue
	}
	p := new(copier)
	building[t] = p
	*p = makeCopier(t, building)
	copiers.Store(t, *p)
	return *p
}

func setValue(dst, src reflect.Value) { dst.Set(src) }

func makeCopier(t reflect.Type, building map[reflect.Type]*copier) copier {
	switch t.Kind() {
	case reflect.Pointer:
		elem := build(t.Elem(), building)
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			p := reflect.New(t.Elem())
			elem(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Struct:
		type field struct {
			i int
			c copier
		}
		var fields []field
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && deep(f.Type) {
				fields = append(fields, field{i, build(f.Type, building)})
			}
		}
		return func(dst, src reflect.Value) {
			dst.Set(src)
			for _, f := range fields {
				f.c(dst.Field(f.i), src.Field(f.i))
			}
		}
	case reflect.Slice:
		shallow := !deep(t.Elem())
		elem := build(t.Elem(), building)
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			s := reflect.MakeSlice(t, src.Len(), src.Len())
			if shallow {
				reflect.Copy(s, src)
			} else {
				for i := range src.Len() {
					elem(s.Index(i), src.Index(i))
				}
			}
			dst.Set(s)
		}
	case reflect.Array:
		elem := build(t.Elem(), building)
		return func(dst, src reflect.Value) {
			for i := range src.Len() {
				elem(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		key, elem := build(t.Key(), building), build(t.Elem(), building)
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			m := reflect.MakeMapWithSize(t, src.Len())
			k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			for it := src.MapRange(); it.Next(); {
				key(k, it.Key())
				elem(v, it.Value())
				m.SetMapIndex(k, v)
			}
			dst.Set(m)
		}
	case reflect.Interface:
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			v := reflect.New(src.Elem().Type()).Elem()
			deepCopy(v, src.Elem())
			dst.Set(v)
		}
	}
	return setValue
}

// deeps caches deep's answers.
var deeps sync.Map // reflect.Type -> bool

// deep tells whether a copy of a t made by assignment would share memory a
// caller could change through exported fields: a pointer, slice, map or
// interface, or a struct or array holding one.
func deep(t reflect.Type) bool {
	if d, ok := deeps.Load(t); ok {
		return d.(bool)
	}
	deeps.Store(t, true) // a type that holds itself is deep
	d := isDeep(t)
	deeps.Store(t, d)
	return d
}

func isDeep(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && deep(f.Type) {
				return true
			}
		}
		return false
	case reflect.Array:
		return deep(t.Elem())
	}
	return false
}

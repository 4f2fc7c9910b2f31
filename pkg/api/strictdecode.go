package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// DecodeStrict decodes a JSON document into v and refuses, all at once,
// every field v's type does not have (matched exactly, as Kubernetes
// does, not case-insensitively as encoding/json would) and every value of
// the wrong type; each refusal is a *FieldError naming the field's path
// (spec.controlPlane.count).
func DecodeStrict(data []byte, v any) error {
	unknown, fatal := decodeStrict(data, v)
	return errors.Join(append(unknown, fatal)...)
}

// decodeStrict decodes data into v even when it has unknown fields, and
// returns the unknown fields apart from what stopped the decoding (bad
// JSON, a value of the wrong type), so that a caller may still check what
// was decoded.
func decodeStrict(data []byte, v any) (unknown []error, fatal error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: not a JSON document: %v", ErrInvalidSpec, err)
	}
	unknown = unknownFields(doc, reflect.TypeOf(v), "")
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return unknown, &FieldError{Field: jsonPath(te.Field), Value: te.Value, Reason: "a JSON " + te.Value + " where " + typeName(te.Type) + " belongs",
				Accepted: "give " + typeName(te.Type)}
		}
		return unknown, fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	return unknown, nil
}

// inlineTypes are the structs embedded inline in API objects, whose Go
// names encoding/json puts in an error's field path.
var inlineTypes = []string{"TypeMeta", "MachineSet"}

// jsonPath is encoding/json's field path without the names of inline
// structs: spec.controlPlane.count, not spec.controlPlane.MachineSet.count.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	out := parts[:0]
	for _, p := range parts {
		if !slices.Contains(inlineTypes, p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// unknownFields walks doc (decoded JSON) beside t and returns a
// *FieldError for every object key t has no field for.
func unknownFields(doc any, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		// Check the text here, so that a refusal names its path.
		if str, ok := doc.(string); ok {
			if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(str)); err != nil {
				return []error{&FieldError{Field: path, Value: str, Reason: err.Error(), Accepted: "give " + textHint(t)}}
			}
		}
		return nil
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil // a type error, json.Unmarshal names it
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			at := joinPath(path, k)
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, &FieldError{Field: at, Value: obj[k], Reason: "unknown field",
					Accepted: "use the fields " + strings.Join(sortedKeys(fields), ", ")})
				continue
			}
			errs = append(errs, unknownFields(obj[k], ft, at)...)
		}
	case reflect.Slice, reflect.Array:
		if list, ok := doc.([]any); ok {
			for i, e := range list {
				errs = append(errs, unknownFields(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case reflect.Map:
		if obj, ok := doc.(map[string]any); ok {
			for k, e := range obj {
				errs = append(errs, unknownFields(e, t.Elem(), fmt.Sprintf("%s[%s]", path, k))...)
			}
		}
	}
	return errs
}

// jsonFields maps the JSON names of t's fields (embedded structs
// promoted) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys(m map[string]reflect.Type) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// textHint says what a text-decoded type accepts.
func textHint(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return "a duration as 90s or 10m"
	}
	return "a string " + t.Name() + " accepts"
}

// typeName names a Go type as a person writing YAML knows it.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "a time as 2026-01-02T15:04:05Z"
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

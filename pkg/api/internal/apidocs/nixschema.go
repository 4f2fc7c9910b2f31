package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"go/ast"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// The NixOS module's options for the objects the flake declares
// (nixos-module/objects.nix) are made from a schema of their specs that
// this generator writes, nixos-module/lib/api-schema.json (`make
// api-docs`; TestNixSchemaUpToDate fails when it and pkg/api drift
// apart), so that a field added to a spec is an option at once.

// nixSpecs are the specs people declare, by the schema's name.
var nixSpecs = map[string]any{
	"etcdCluster":       api.EtcdClusterSpec{},
	"machinePool":       api.MachinePoolSpec{},
	"kubernetesCluster": api.KubernetesClusterSpec{},
}

// schemaNode is one type of the schema: type is struct, list, attrs,
// string, int, float, bool or any.
type schemaNode struct {
	Type        string                 `json:"type"`
	Description string                 `json:"description,omitempty"`
	Enum        []string               `json:"enum,omitempty"`
	Format      string                 `json:"format,omitempty"` // duration: a Go duration`
	Of          *schemaNode            `json:"of,omitempty"`
	Fields      map[string]*schemaNode `json:"fields,omitempty"`
}

var (
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
)

// writeNixSchema writes the schema of nixSpecs as JSON.
func (p *apiPackage) writeNixSchema(out io.Writer) error {
	schema := map[string]*schemaNode{}
	for name, spec := range nixSpecs {
		n, err := p.schemaOf(reflect.TypeOf(spec), map[reflect.Type]bool{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		schema[name] = n
	}
	b, err := json.MarshalIndent(schema, "", " ")
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// schemaOf is t's node, as its JSON form has it.
func (p *apiPackage) schemaOf(t reflect.Type, seen map[reflect.Type]bool) (*schemaNode, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawType:
		return &schemaNode{Type: "any"}, nil
	case t == timeType:
		return &schemaNode{Type: "string", Description: "RFC 3339 time"}, nil
	case t.Kind() != reflect.String && (t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) ||
		t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)):
		if t == reflect.TypeFor[api.Duration]() {
			return &schemaNode{Type: "string", Format: "duration"}, nil
		}
		return &schemaNode{Type: "any"}, nil
	}
	switch t.Kind() {
	case reflect.String:
		n := &schemaNode{Type: "string"}
		if t.PkgPath() == reflect.TypeFor[api.Duration]().PkgPath() {
			n.Enum = p.enums[t.Name()]
		}
		return n, nil
	case reflect.Bool:
		return &schemaNode{Type: "bool"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &schemaNode{Type: "int"}, nil
	case reflect.Float32, reflect.Float64:
		return &schemaNode{Type: "float"}, nil
	case reflect.Interface:
		return &schemaNode{Type: "any"}, nil
	case reflect.Slice, reflect.Array:
		of, err := p.schemaOf(t.Elem(), seen)
		return &schemaNode{Type: "list", Of: of}, err
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %s: only string keys have a Nix form", t.Key())
		}
		of, err := p.schemaOf(t.Elem(), seen)
		return &schemaNode{Type: "attrs", Of: of}, err
	case reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("%s contains itself", t)
		}
		seen[t] = true
		defer delete(seen, t)
		n := &schemaNode{Type: "struct", Fields: map[string]*schemaNode{}}
		if err := p.structFields(t, n, seen); err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("%s: no Nix form for kind %s", t, t.Kind())
}

// structFields adds t's fields (an inline one's fields) to n.
func (p *apiPackage) structFields(t reflect.Type, n *schemaNode, seen map[reflect.Type]bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag[0] == "-" {
			continue
		}
		if f.Anonymous && tag[0] == "" {
			if err := p.structFields(f.Type, n, seen); err != nil {
				return err
			}
			continue
		}
		name := tag[0]
		if name == "" {
			name = f.Name
		}
		c, err := p.schemaOf(f.Type, seen)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		c.Description = strings.TrimSpace(strings.Join([]string{p.fieldDoc(t.Name(), f.Name), c.Description}, " "))
		n.Fields[name] = c
	}
	return nil
}

// fieldDoc is the doc comment of field of the package's struct typ, its
// Default: and Validation: lines kept.
func (p *apiPackage) fieldDoc(typ, field string) string {
	t, ok := p.types[typ]
	if !ok {
		return ""
	}
	st, ok := t.expr.(*ast.StructType)
	if !ok {
		return ""
	}
	for _, f := range st.Fields.List {
		for _, id := range f.Names {
			if id.Name != field || f.Doc == nil {
				continue
			}
			doc, def, val := splitDoc(f.Doc.Text())
			s := doc
			if def != "" {
				s += " Default: " + def
			}
			if val != "" {
				s += " Validation: " + val
			}
			return strings.TrimSpace(s)
		}
	}
	return ""
}

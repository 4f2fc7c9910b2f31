package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// apiPackage is what the generator reads from pkg/api's source.
type apiPackage struct {
	// types are the package's named types, by name.
	types map[string]*typeDecl
	// enums are the values of the string constants of each named type.
	enums map[string][]string
	// kinds are the names of the stored objects' types (the structs that
	// embed TypeMeta), sorted.
	kinds []string
}

// typeDecl is one named type.
type typeDecl struct {
	name string
	doc  string
	expr ast.Expr
}

// parse reads the non-test Go files of dir.
func parse(dir string) (*apiPackage, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &apiPackage{types: map[string]*typeDecl{}, enums: map[string][]string{}}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc := g.Doc
					if s.Doc != nil {
						doc = s.Doc
					}
					p.types[s.Name.Name] = &typeDecl{name: s.Name.Name, doc: doc.Text(), expr: s.Type}
				case *ast.ValueSpec:
					p.addEnum(g.Tok, s)
				}
			}
		}
	}
	for name, t := range p.types {
		if st, ok := t.expr.(*ast.StructType); ok && embeds(st, "TypeMeta") {
			p.kinds = append(p.kinds, name)
		}
	}
	sort.Strings(p.kinds)
	if len(p.kinds) == 0 {
		return nil, fmt.Errorf("%s: no struct embeds TypeMeta", dir)
	}
	return p, nil
}

// addEnum records a typed string constant: `X T = "v"`.
func (p *apiPackage) addEnum(tok token.Token, s *ast.ValueSpec) {
	id, ok := s.Type.(*ast.Ident)
	if tok != token.CONST || !ok {
		return
	}
	for _, v := range s.Values {
		if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if val, err := strconv.Unquote(lit.Value); err == nil {
				p.enums[id.Name] = append(p.enums[id.Name], val)
			}
		}
	}
}

func embeds(st *ast.StructType, name string) bool {
	for _, f := range st.Fields.List {
		if id, ok := f.Type.(*ast.Ident); ok && len(f.Names) == 0 && id.Name == name {
			return true
		}
	}
	return false
}

// field is one row of the reference.
type field struct {
	path, typ, def, validation, doc string
}

// fields flattens the struct named typ into rows under prefix; a struct
// field of the package's own types is followed into its fields (seen
// stops a type that contains itself).
func (p *apiPackage) fields(prefix, typ string, seen map[string]bool) []field {
	t, ok := p.types[typ]
	if !ok {
		return nil
	}
	st, ok := t.expr.(*ast.StructType)
	if !ok || seen[typ] {
		return nil
	}
	seen[typ] = true
	defer delete(seen, typ)
	var out []field
	for _, f := range st.Fields.List {
		name, inline, skip := jsonName(f)
		if skip {
			continue
		}
		if inline {
			out = append(out, p.fields(prefix, typeName(f.Type), seen)...)
			continue
		}
		text := f.Doc.Text()
		if text == "" {
			text = f.Comment.Text()
		}
		doc, def, validation := splitDoc(text)
		typ, elem, suffix := p.describe(f.Type)
		if doc == "" && elem != "" {
			doc = oneLine(p.types[elem].doc) // the struct type's own doc
		}
		names := []string{name}
		if len(f.Names) > 1 { // A, B T: no tag, the Go names
			names = nil
			for _, n := range f.Names {
				names = append(names, n.Name)
			}
		}
		for _, name := range names {
			path := prefix + name
			out = append(out, field{path: path, typ: typ, def: def, validation: validation, doc: doc})
			if elem != "" && !seen[elem] {
				out = append(out, p.fields(path+suffix+".", elem, seen)...)
			}
		}
	}
	return out
}

// jsonName is a field's JSON name; inline for an embedded or ",inline"
// field, skip for "-" or an unexported one.
func jsonName(f *ast.Field) (name string, inline, skip bool) {
	tag := ""
	if f.Tag != nil {
		if s, err := strconv.Unquote(f.Tag.Value); err == nil {
			tag = reflect.StructTag(s).Get("json")
		}
	}
	parts := strings.Split(tag, ",")
	if parts[0] == "-" && len(parts) == 1 {
		return "", false, true
	}
	if len(f.Names) == 0 {
		return "", parts[0] == "", false
	}
	if !f.Names[0].IsExported() {
		return "", false, true
	}
	for _, o := range parts[1:] {
		if o == "inline" {
			return "", true, false
		}
	}
	if parts[0] == "" {
		return f.Names[0].Name, false, false
	}
	return parts[0], false, false
}

// typeName is the package-local name a field's type refers to ("" for
// another package's type).
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	}
	return ""
}

// describe is a field type as a reader of JSON or YAML sees it, and the
// package struct type whose fields follow (with the path suffix that
// reaches them: "[]" through a list, ".*" through a map).
func (p *apiPackage) describe(e ast.Expr) (desc, elem, suffix string) {
	switch e := e.(type) {
	case *ast.StarExpr:
		return p.describe(e.X)
	case *ast.ArrayType:
		if id, ok := e.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return "bytes (base64)", "", ""
		}
		d, elem, suffix := p.describe(e.Elt)
		return "list of " + d, elem, "[]" + suffix
	case *ast.MapType:
		k, _, _ := p.describe(e.Key)
		d, elem, suffix := p.describe(e.Value)
		return "map of " + k + " to " + d, elem, ".*" + suffix
	case *ast.SelectorExpr:
		switch x := fmt.Sprint(e.X) + "." + e.Sel.Name; x {
		case "time.Time":
			return "time (RFC 3339)", "", ""
		case "time.Duration":
			return "integer (nanoseconds)", "", ""
		default:
			return x, "", ""
		}
	case *ast.Ident:
		return p.describeIdent(e.Name)
	case *ast.InterfaceType:
		return "any", "", ""
	}
	return fmt.Sprintf("%T", e), "", ""
}

func (p *apiPackage) describeIdent(name string) (desc, elem, suffix string) {
	switch name {
	case "string":
		return "string", "", ""
	case "bool":
		return "boolean", "", ""
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "integer", "", ""
	case "float32", "float64":
		return "number", "", ""
	case "Duration":
		return "duration (as 90s, 5m)", "", ""
	}
	t, ok := p.types[name]
	if !ok {
		return name, "", ""
	}
	if _, ok := t.expr.(*ast.StructType); ok {
		return "object (" + name + ")", name, ""
	}
	d, _, _ := p.describe(t.expr)
	if vals := p.enums[name]; len(vals) > 0 {
		q := make([]string, len(vals))
		for i, v := range vals {
			q[i] = strconv.Quote(v)
		}
		return d + ", one of " + strings.Join(q, ", "), "", ""
	}
	return d, "", ""
}

// splitDoc splits a field's doc comment into its description and its
// Default: and Validation: lines (each runs to the end of its paragraph).
func splitDoc(text string) (doc, def, validation string) {
	var docs, defs, vals []string
	cur := &docs
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			cur = &docs
			continue
		case strings.HasPrefix(line, "Default:"):
			cur = &defs
			line = strings.TrimSpace(strings.TrimPrefix(line, "Default:"))
		case strings.HasPrefix(line, "Validation:"):
			cur = &vals
			line = strings.TrimSpace(strings.TrimPrefix(line, "Validation:"))
		}
		*cur = append(*cur, line)
	}
	return strings.Join(docs, " "), strings.Join(defs, " "), strings.Join(vals, " ")
}

package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	apiDir  = "../.."
	docPath = "../../../../docs/api.md"
	// nixSchemaPath is the schema of the declared specs, for the NixOS
	// module's options.
	nixSchemaPath = "../../../../nixos-module/lib/api-schema.json"
)

// TestNixSchemaUpToDate: the schema the NixOS module makes the options
// of the flake's objects from (nixos-module/lib/api-schema.json) is what
// the generator writes from pkg/api's specs: a field added to a spec and
// not to the options fails here; run `make api-docs`.
func TestNixSchemaUpToDate(t *testing.T) {
	p, err := parse(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.writeNixSchema(&buf); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(nixSchemaPath)
	if err != nil {
		t.Fatalf("%v; run make api-docs", err)
	}
	if !bytes.Equal(have, buf.Bytes()) {
		t.Fatalf("%s is not what pkg/api generates; run make api-docs", nixSchemaPath)
	}
}

// TestReferenceUpToDate: docs/api.md is what the generator writes from
// pkg/api; run `make api-docs` after changing a type or its doc comments.
func TestReferenceUpToDate(t *testing.T) {
	p, err := parse(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.write(&buf); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v; run make api-docs", err)
	}
	if !bytes.Equal(have, buf.Bytes()) {
		t.Fatalf("docs/api.md is not what pkg/api generates; run make api-docs")
	}
}

// TestValidatedFieldsDocumented: every field path pkg/api's validation
// names as a string literal (FieldError{Field: "spec.x"} or
// bad("spec.x", ...)) has a Validation: line on its field, so the
// reference says what is accepted wherever the code refuses.
func TestValidatedFieldsDocumented(t *testing.T) {
	p, err := parse(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{"apiVersion": true, "kind": true}
	for _, f := range p.fields("metadata.", "ObjectMeta", map[string]bool{}) {
		documented[f.path] = f.validation != ""
	}
	for _, kind := range p.kinds {
		for _, f := range p.fields("", kind, map[string]bool{"ObjectMeta": true}) {
			documented[f.path] = documented[f.path] || f.validation != ""
		}
	}
	var missing []string
	for _, path := range validatedPaths(t) {
		if !documented[path] {
			missing = append(missing, path)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("validated in pkg/api but with no Validation: line on the field: %s", strings.Join(missing, ", "))
	}
}

// validatedPaths are the field paths pkg/api's non-test code refuses, as
// string literals.
func validatedPaths(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(apiDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var e ast.Expr
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Field" {
					e = n.Value
				}
			case *ast.CallExpr:
				if fn, ok := n.Fun.(*ast.Ident); ok && fn.Name == "bad" && len(n.Args) > 0 {
					e = n.Args[0]
				}
			}
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(s, ".") {
					seen[s] = true
				}
			}
			return true
		})
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

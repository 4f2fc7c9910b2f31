package coordinator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestNoControllerHoldsTheCoordinator: controllers take the narrow
// dependencies they use (a store view, the member admin, a clock, a
// logger), never *Coordinator: no struct of the package but Coordinator
// itself has a field of that type.
func TestNoControllerHoldsTheCoordinator(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name == "Coordinator" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				if holdsCoordinator(fld.Type) {
					t.Errorf("%s: %s has a field of type *Coordinator; give it the dependencies it uses", fset.Position(fld.Pos()), ts.Name.Name)
				}
			}
			return true
		})
	}
	if files == 0 {
		t.Fatal("no source file read")
	}
}

// holdsCoordinator tells whether typ is *Coordinator, or a func, map,
// slice or channel of it.
func holdsCoordinator(typ ast.Expr) bool {
	found := false
	ast.Inspect(typ, func(n ast.Node) bool {
		if s, ok := n.(*ast.StarExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == "Coordinator" {
				found = true
			}
		}
		return !found
	})
	return found
}

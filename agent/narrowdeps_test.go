package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// composers are the types that may hold *Agent: the Agent itself and its
// bring-up, which is the composition's own first sequence (it starts the
// groups Run composes, agent/bringup.go).
var composers = map[string]bool{"Agent": true, "bringUp": true}

// TestNoComponentHoldsTheAgent: the agent's components and controllers
// take the dependencies they use (the configuration, the store, a clock, a
// logger, another component), never *Agent: no struct of the package but
// the composers has a field of that type.
func TestNoComponentHoldsTheAgent(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	structs := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || composers[ts.Name.Name] {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			structs++
			for _, fld := range st.Fields.List {
				if holdsAgent(fld.Type) {
					t.Errorf("%s: %s has a field of type *Agent; give it the dependencies it uses", fset.Position(fld.Pos()), ts.Name.Name)
				}
			}
			return true
		})
	}
	if structs < 10 {
		t.Fatalf("read %d structs of the package; want its components", structs)
	}
}

// holdsAgent tells whether typ is this package's Agent or *Agent, or a
// func, map, slice or channel of it.
func holdsAgent(typ ast.Expr) bool {
	found := false
	ast.Inspect(typ, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			return false // another package's Agent (metrics.Agent)
		case *ast.Ident:
			found = found || n.Name == "Agent"
		}
		return !found
	})
	return found
}

// Package narrowdeps finds the structs of a package that hold its
// composition root (the coordinator's *Coordinator, the agent's *Agent)
// rather than the dependencies they use.
package narrowdeps

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// Holders parses the Go files of dir, tests left out, and names every
// field, as "file:line: Struct", of a struct type not in allowed whose type
// is the package's own type root: root, *root, or a func, map, slice or
// channel of it (another package's type of that name is not). structs is
// how many struct types it read.
func Holders(dir, root string, allowed map[string]bool) (holders []string, structs int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, 0, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || allowed[ts.Name.Name] || ts.Name.Name == root {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			structs++
			for _, fld := range st.Fields.List {
				if holds(fld.Type, root) {
					p := fset.Position(fld.Pos())
					holders = append(holders, fmt.Sprintf("%s:%d: %s", filepath.Base(p.Filename), p.Line, ts.Name.Name))
				}
			}
			return true
		})
	}
	return holders, structs, nil
}

// holds tells whether typ names the package's type root.
func holds(typ ast.Expr, root string) bool {
	found := false
	ast.Inspect(typ, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			return false // another package's type
		case *ast.Ident:
			found = found || n.Name == root
		}
		return !found
	})
	return found
}

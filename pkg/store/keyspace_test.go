package store

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// clientv3Path is the import whose key operations belong to this package.
const clientv3Path = "go.etcd.io/etcd/client/v3"

// keyOps are the names in clientv3 that build a key operation: the
// operations, the comparisons and their targets, and the options of a
// read, write or watch, and the constructors of a KV or Watcher. Types
// (Op, Cmp, OpOption, LeaseID), the cluster, maintenance, auth and lease
// APIs, WithSerializable (MemberList takes it too) and WithRequireLeader
// (a context, not an option) are not key operations.
var keyOps = map[string]bool{
	"OpGet": true, "OpPut": true, "OpDelete": true, "OpTxn": true,
	"Compare": true, "Value": true, "Version": true, "ModRevision": true,
	"CreateRevision": true, "LeaseValue": true,
	"WithPrefix": true, "WithRev": true, "WithKeysOnly": true, "WithCountOnly": true,
	"WithLimit": true, "WithSort": true, "WithLease": true, "WithPrevKV": true,
	"WithRange": true, "WithFromKey": true, "WithFirstCreate": true,
	"WithLastCreate": true, "WithFirstKey": true, "WithLastKey": true,
	"WithFirstRev": true, "WithLastRev": true, "WithMinModRev": true,
	"WithMaxModRev": true, "WithMinCreateRev": true, "WithMaxCreateRev": true,
	"WithIgnoreValue": true, "WithIgnoreLease": true, "WithFilterPut": true,
	"WithFilterDelete": true, "WithProgressNotify": true, "WithCreatedNotify": true,
	"WithFragment": true, "NewKV": true, "NewKVFromKVClient": true,
	"NewWatcher": true, "NewWatchFromWatchClient": true,
}

// clientKeyCalls are the key methods of a client or its KV.
var clientKeyCalls = map[string]bool{"Get": true, "Put": true, "Delete": true, "Txn": true, "Watch": true, "Do": true}

// keyspaceExceptions are the files outside this package that may use
// clientv3's key operations, each with why: keys that are not nico's.
var keyspaceExceptions = map[string]string{
	"pkg/etcdnsproxy/kv.go": "forwards a Kubernetes distribution's own etcd requests under /clusters/<c>/: keys that are not nico's",
}

// clientTypes are clientv3's types whose key methods are key operations.
var clientTypes = map[string]bool{"Client": true, "KV": true, "Watcher": true}

// keyOpsIn returns, for each key operation in the Go source src (named
// file), "file:line: expression": a selector of a key operation on the
// file's import of clientv3 (whatever its local name), and a call of a
// key method on a store's Client(), on a KV field, or on a name the file
// declares (a parameter, field or variable) of type *clientv3.Client,
// clientv3.KV or clientv3.Watcher. It reads one file without types: a
// client that comes from another file or from := is not recognised.
func keyOpsIn(file string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == clientv3Path {
			local = "clientv3"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "_" {
		local = ""
	}
	// isClient tells whether a declared type is one of clientTypes.
	isClient := func(typ ast.Expr) bool {
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		switch t := typ.(type) {
		case *ast.SelectorExpr:
			id, ok := t.X.(*ast.Ident)
			return ok && local != "" && id.Name == local && clientTypes[t.Sel.Name]
		case *ast.Ident:
			return local == "." && clientTypes[t.Name]
		}
		return false
	}
	clients := map[string]bool{} // names declared of a client type
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if isClient(n.Type) {
				for _, id := range n.Names {
					clients[id.Name] = true
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil && isClient(n.Type) {
				for _, id := range n.Names {
					clients[id.Name] = true
				}
			}
		}
		return true
	})
	var out []string
	report := func(n ast.Node) {
		pos, end := fset.Position(n.Pos()), fset.Position(n.End())
		out = append(out, fmt.Sprintf("%s:%d: %s", file, pos.Line, src[pos.Offset:end.Offset]))
	}
	selected := map[*ast.Ident]bool{} // idents that name a selector's member
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			selected[n.Sel] = true
			if id, ok := n.X.(*ast.Ident); ok && local != "" && id.Name == local && keyOps[n.Sel.Name] {
				report(n)
			}
		case *ast.Ident:
			// A dot import brings the key operations in unqualified.
			if local == "." && keyOps[n.Name] && !selected[n] {
				report(n)
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !clientKeyCalls[sel.Sel.Name] {
				return true
			}
			switch recv := sel.X.(type) {
			case *ast.CallExpr:
				if rs, ok := recv.Fun.(*ast.SelectorExpr); ok && rs.Sel.Name == "Client" && len(recv.Args) == 0 {
					report(sel)
				}
			case *ast.SelectorExpr:
				if recv.Sel.Name == "KV" || clients[recv.Sel.Name] {
					report(sel)
				}
			case *ast.Ident:
				if clients[recv.Name] {
					report(sel)
				}
			}
		}
		return true
	})
	return out, nil
}

// TestKeyspaceOwnedByStore: no file outside this package (and the tests/
// tree) reads, writes or watches etcd keys itself; it goes through a
// Store, so that every key nico uses is built, fenced and scoped here.
// The exceptions name keys that are not nico's.
func TestKeyspaceOwnedByStore(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	var found []string
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "pkg/store" || rel == "tests" || rel == "vendor" || rel == "testdata" ||
				strings.HasSuffix(rel, "/testdata") || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ops, err := keyOpsIn(rel, src)
		if err != nil {
			return err
		}
		if len(ops) > 0 {
			seen[rel] = true
			if _, ok := keyspaceExceptions[rel]; ok {
				return nil
			}
		}
		found = append(found, ops...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range found {
		t.Errorf("%s: a key operation outside package store: add what it needs to package store", op)
	}
	for file := range keyspaceExceptions {
		if !seen[file] {
			t.Errorf("exception %s has no key operation left: remove it from keyspaceExceptions", file)
		}
	}
}

// TestKeyOpsIn: the checker finds a key operation whatever the local name
// of clientv3's import, and a key method called on a store's client or a
// client's KV; it leaves types, the non-key APIs and other packages alone.
func TestKeyOpsIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"op in agent", `package agent
import clientv3 "go.etcd.io/etcd/client/v3"
var op = clientv3.OpGet("nodes/a")`, []string{"agent/x.go:3: clientv3.OpGet"}},
		{"default name", `package agent
import "go.etcd.io/etcd/client/v3"
var op = clientv3.OpDelete("k", clientv3.WithPrefix())`, []string{"agent/x.go:3: clientv3.OpDelete", "agent/x.go:3: clientv3.WithPrefix"}},
		{"aliased import", `package agent
import etcd "go.etcd.io/etcd/client/v3"
var cmp = etcd.Compare(etcd.Value("k"), "=", "v")`, []string{"agent/x.go:3: etcd.Compare", "agent/x.go:3: etcd.Value"}},
		{"dot import", `package agent
import . "go.etcd.io/etcd/client/v3"
var op = OpPut("k", "v")`, []string{"agent/x.go:3: OpPut"}},
		{"store client", `package agent
func f() { st.Client().Get(ctx, "k"); a.cli.KV.Txn(ctx) }`, []string{"agent/x.go:2: st.Client().Get", "agent/x.go:2: a.cli.KV.Txn"}},
		{"declared clients", `package agent
import clientv3 "go.etcd.io/etcd/client/v3"
type admin struct{ cli *clientv3.Client }
func (a *admin) f(kv clientv3.KV) { a.cli.Put(ctx, "k", "v"); kv.Delete(ctx, "k"); kv.Do(ctx, op); a.cli.MemberList(ctx) }`, []string{"agent/x.go:4: a.cli.Put", "agent/x.go:4: kv.Delete", "agent/x.go:4: kv.Do"}},
		{"dot import, members of other values", `package agent
import . "go.etcd.io/etcd/client/v3"
var v = x.Value + OpGet`, []string{"agent/x.go:3: OpGet"}},
		{"types and other APIs", `package agent
import clientv3 "go.etcd.io/etcd/client/v3"
var (
	id  clientv3.LeaseID
	ops []clientv3.Op
	c   *clientv3.Client
)
func f() { c.MemberList(ctx, clientv3.WithSerializable()); st.Client().Grant(ctx, 5); st.Get(ctx, "k", o) }`, nil},
		{"another package's OpGet", `package agent
import clientv3 "example.com/other"
var op = clientv3.OpGet("k")`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := keyOpsIn("agent/x.go", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

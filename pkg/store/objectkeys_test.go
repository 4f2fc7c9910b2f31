package store

import (
	"time"

	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

func TestKeyOf(t *testing.T) {
	tests := []struct {
		obj  api.Object
		want string
	}{
		{api.NewNode("cp-1"), "nodes/cp-1"},
		{api.NewJoinRequest("cp-2"), "joins/cp-2"},
		{api.NewRemoveRequest("cp-3"), "removals/cp-3"},
		{api.NewOperation("join-cp-2-1"), "ops/join-cp-2-1"},
		{api.NewMachine("web-0"), "machines/web-0"},
		{api.NewMachinePool("web"), "pools/web"},
		{api.NewHypervisor("hv-1"), "hypervisors/hv-1"},
		{api.NewMachineClaim("etcd"), "machineclaims/etcd"},
		{api.NewNixosConfiguration("cp-1"), "nixosconfigs/cp-1"},
		{api.NewRollout("r1"), "rollouts/r1"},
		{api.NewToken("abcdef"), "secrets/tokens/abcdef"},
		{api.NewGossipSecret("cp-1"), "secrets/nodes/cp-1/gossip-secret"},
		{api.NewGossipKey(), "gossip-key"},
		{api.NewLiveness(), "liveness"},
		{api.NewEtcdCluster(), "etcdcluster"},
		{api.NewNodeEtcdVersion("cp-1", "3.7.3", time.Time{}), "etcdversions/cp-1"},
		{api.NewKubernetesCluster("k1"), "clusters/k1"},
		{api.NewSecret("demo-ca"), "secrets/named/demo-ca"},
		{api.NewNodeSecrets("cp-1"), "secrets/nodes/cp-1/named-secrets"},
		{api.NewComponentReport("cp-1"), "componentreports/cp-1"},
		{api.NewDrainRequest("dp-1"), "drainrequests/dp-1"},
		{api.NewSwitchRequest("cp-1"), "switches/cp-1"},
		{api.NewKubeconfigReport("k1"), "kubeconfigreports/k1"},
		{api.NewSnapshotDrill(api.SnapshotVerification{}), "snapshot-drill"},
		{api.NewClusterLineage(nil), "lineage"},
		{api.NewFlakeObjects(), "flake-objects"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		kind := tt.obj.GetTypeMeta().Kind
		seen[kind] = true
		t.Run(kind, func(t *testing.T) {
			got, err := KeyOf(tt.obj)
			if err != nil || got != tt.want {
				t.Fatalf("KeyOf(%s %q) = %q, %v; want %q", kind, tt.obj.GetMetadata().Name, got, err, tt.want)
			}
		})
	}
	// Every kind the table knows is covered above.
	for _, k := range Kinds() {
		if !seen[k] {
			t.Errorf("kind %s has a key but no case here", k)
		}
	}
}

func TestKeyOfRefuses(t *testing.T) {
	unknown := api.NewNode("x")
	unknown.Kind = "Gadget"
	tests := []struct {
		name string
		obj  api.Object
	}{
		{"unknown kind", unknown},
		{"no kind", &api.Node{Metadata: api.ObjectMeta{Name: "x"}}},
		{"empty name", api.NewNode("")},
		{"slash in name", api.NewMachine("a/b")},
		{"empty singleton name", &api.Liveness{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindLiveness}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if key, err := KeyOf(tt.obj); !errors.Is(err, ErrNoKey) {
				t.Fatalf("KeyOf = %q, %v; want ErrNoKey", key, err)
			}
			if _, err := PutObjectOp(tt.obj); !errors.Is(err, ErrNoKey) {
				t.Fatalf("PutObjectOp: %v; want ErrNoKey", err)
			}
		})
	}
}

func TestObjectWrites(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	m := api.NewMachine("web-0")
	if err := s.CreateObject(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateObject(ctx(t), api.NewMachine("web-0")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	g, err := UnchangedGuard(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Spec.Pool = "web"
	if err := s.UpdateObject(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	// The guard was taken at the old revision: it fails now, naming the key.
	fence, err := s.Client().Put(ctx(t), "fence", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FencedTxn(ctx(t), Fence{Key: "fence", Rev: fence.Header.Revision}, []Guard{g}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale guard: %v, want ErrConflict", err)
	}
	got := &api.Machine{}
	if err := s.Get(ctx(t), MachineKey("web-0"), got); err != nil || got.Spec.Pool != "web" {
		t.Fatalf("read back %+v, %v", got.Spec, err)
	}
	if err := s.PutObject(ctx(t), api.NewMachine("web-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Get(ctx(t), MachineKey("web-1"), &api.Machine{}); err != nil {
		t.Fatal(err)
	}
}

// TestEveryKindHasAKey: every Kind constant package api declares has a
// place in the keyspace, so a new kind cannot be written without one.
func TestEveryKindHasAKey(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("../api/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	known := map[string]bool{}
	for _, k := range Kinds() {
		known[k] = true
	}
	n := 0
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Kind") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						continue
					}
					n++
					if kind := strings.Trim(lit.Value, `"`); !known[kind] {
						t.Errorf("api.%s (%s) has no key in store.KeyOf's table", name.Name, kind)
					}
				}
			}
		}
	}
	if n != len(known) {
		t.Errorf("api declares %d kinds, the key table knows %d", n, len(known))
	}
}

package store

import (
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestView: a View holds each range at one revision, named by the range;
// ViewAt reads an earlier revision; DirKeys carries no values; a range the
// view did not read is a programming error.
func TestView(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	for _, n := range []string{"a", "b"} {
		if err := s.CreateObject(ctx(t), api.NewNode(n)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateObject(ctx(t), api.NewNode("c")); err != nil {
		t.Fatal(err)
	}

	v, err := s.View(ctx(t), Dir(NodesDir), DirKeys(NodesDir), Key(NodeKey("a")), Key(EtcdClusterKey))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ViewObjects[api.Node](v, NodesDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || nodes[2].Metadata.Name != "c" || nodes[2].Metadata.Revision != v.Rev {
		t.Fatalf("nodes %v at %d: want a, b, c, c written at the view's revision", nodes, v.Rev)
	}
	for _, kv := range v.KVs(DirKeys(NodesDir)) {
		if len(kv.Value) != 0 {
			t.Fatalf("DirKeys returned the value of %s", kv.Key)
		}
	}
	if names := v.Names(DirKeys(NodesDir)); len(names) != 3 || !names["b"] {
		t.Fatalf("names %v, want a, b, c", names)
	}
	a := new(api.Node)
	if ok, err := v.Decode(NodeKey("a"), a); !ok || err != nil || a.Metadata.Name != "a" {
		t.Fatalf("decode a: %v %v %+v", ok, err, a.Metadata)
	}
	if ok, err := v.Decode(EtcdClusterKey, new(api.EtcdCluster)); ok || err != nil {
		t.Fatalf("decode of an absent key: %v %v, want false, nil", ok, err)
	}
	if v.Has(EtcdClusterKey) || v.Value(EtcdClusterKey) != nil {
		t.Fatal("an absent key is there")
	}

	old, err := s.ViewAt(ctx(t), before, DirKeys(NodesDir))
	if err != nil {
		t.Fatal(err)
	}
	if names := old.Names(DirKeys(NodesDir)); len(names) != 2 || names["c"] || old.Rev != before {
		t.Fatalf("at %d: %v (rev %d), want a and b", before, names, old.Rev)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "no range "+RemovalsDir) {
			t.Fatalf("reading a range the view did not read: %v, want a panic naming it", r)
		}
	}()
	v.KVs(Dir(RemovalsDir))
}

package store

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestKeyOnly: KeyOnly reads one key's revisions without its value, and
// nothing for an absent key.
func TestKeyOnly(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	n := api.NewNode("a")
	if err := s.CreateObject(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	v, err := s.View(ctx(t), KeyOnly(NodeKey("a")), KeyOnly(NodeKey("b")), Key(NodeKey("a")))
	if err != nil {
		t.Fatal(err)
	}
	kvs := v.KVs(KeyOnly(NodeKey("a")))
	if len(kvs) != 1 || len(kvs[0].Value) != 0 || kvs[0].ModRevision != n.Metadata.Revision {
		t.Fatalf("KeyOnly(a) = %v, want one key at %d with no value", kvs, n.Metadata.Revision)
	}
	if len(v.KVs(KeyOnly(NodeKey("b")))) != 0 {
		t.Fatal("KeyOnly of an absent key read something")
	}
	if len(v.Value(NodeKey("a"))) == 0 {
		t.Fatal("Key(a) beside KeyOnly(a) lost its value")
	}
}

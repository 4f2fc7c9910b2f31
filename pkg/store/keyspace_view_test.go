package store

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTxnOrView: when the comparisons hold the writes apply and the view
// reads what they wrote; when not, nothing is written and the view reads
// the keys as they stand; both at the transaction's revision.
func TestTxnOrView(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	put, err := PutObjectOp(api.NewNode("a"))
	if err != nil {
		t.Fatal(err)
	}
	ranges := []Range{Key(NodeKey("a")), DirKeys(JoinsDir)}
	v, ok, err := s.TxnOrView(ctx(t), []clientv3.Cmp{Absent(NodeKey("a"))}, []clientv3.Op{put, PutValueOp(JoinKey("a"), "1")}, ranges...)
	if err != nil || !ok {
		t.Fatalf("first: ok %v, %v; want the writes applied", ok, err)
	}
	n := &api.Node{}
	if found, err := v.Decode(NodeKey("a"), n); !found || err != nil || n.Metadata.Revision != v.Rev {
		t.Fatalf("view after the writes: node %v found %v, %v at %d", n.Metadata, found, err, v.Rev)
	}
	if !v.Names(DirKeys(JoinsDir))["a"] {
		t.Fatalf("view after the writes: joins %v", v.Names(DirKeys(JoinsDir)))
	}

	v2, ok, err := s.TxnOrView(ctx(t), []clientv3.Cmp{Absent(NodeKey("a"))}, []clientv3.Op{PutValueOp(JoinKey("b"), "1")}, ranges...)
	if err != nil || ok {
		t.Fatalf("second: ok %v, %v; want the comparison to fail", ok, err)
	}
	if v2.Rev != v.Rev || !v2.Has(NodeKey("a")) || v2.Names(DirKeys(JoinsDir))["b"] {
		t.Fatalf("view of a failed txn at %d (want %d): node %v, joins %v", v2.Rev, v.Rev, v2.Has(NodeKey("a")), v2.Names(DirKeys(JoinsDir)))
	}
}

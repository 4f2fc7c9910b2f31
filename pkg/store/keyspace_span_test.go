package store

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
)

// TestSpan: ReadSpan reads the keys of several directories in [start,
// end) and no others; WatchSpan reports their changes from the revision
// asked, with the previous values.
func TestSpan(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	put, err := s.Txn(ctx(t), nil, PutValueOp(HeartbeatKey("a"), "1"), PutValueOp(JoinKey("a"), "1"), PutValueOp(NodeKey("a"), "1"))
	if err != nil {
		t.Fatal(err)
	}
	kvs, rev, err := s.ReadSpan(ctx(t), HeartbeatsDir, NodesDir)
	if err != nil || rev != put.Header.Revision || len(kvs) != 2 || string(kvs[0].Key) != HeartbeatKey("a") || string(kvs[1].Key) != JoinKey("a") {
		t.Fatalf("ReadSpan = %v at %d, %v; want the heartbeat and the join, not the node", kvs, rev, err)
	}
	ch := s.WatchSpan(ctx(t), HeartbeatsDir, NodesDir, rev+1)
	if _, err := s.Txn(ctx(t), nil, PutValueOp(NodeKey("a"), "2"), PutValueOp(JoinKey("a"), "2")); err != nil {
		t.Fatal(err)
	}
	resp := <-ch
	if len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != JoinKey("a") || resp.Events[0].PrevKv == nil || string(resp.Events[0].PrevKv.Value) != "1" {
		t.Fatalf("WatchSpan saw %+v; want the join's change with its previous value", resp.Events)
	}
}

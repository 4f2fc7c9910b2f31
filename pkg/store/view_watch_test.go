package store

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestWatchDir: WatchDir reports a change under its directory, and with
// dir "" one anywhere under the prefix in the keyspace, never one outside it.
func TestWatchDir(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	nodes := s.WatchDir(ctx(t), NodesDir, rev+1)
	all := s.WatchDir(ctx(t), "", rev+1)
	if _, err := s.Txn(ctx(t), nil, PutValueOp(NudgeKey, "x")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateObject(ctx(t), api.NewNode("a")); err != nil {
		t.Fatal(err)
	}
	resp := <-all
	if err := resp.Err(); err != nil || len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != NudgeKey {
		t.Fatalf("whole keyspace: %v %v, want the nudge first", err, resp.Events)
	}
	resp = <-nodes
	if err := resp.Err(); err != nil || len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != NodeKey("a") {
		t.Fatalf("nodes: %v %v, want node a only", err, resp.Events)
	}
	raw := etcdtest.NewClient(t, c.Endpoints()...)
	if _, err := raw.Put(ctx(t), "/elsewhere/x", "y"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateObject(ctx(t), api.NewNode("b")); err != nil {
		t.Fatal(err)
	}
	for resp := range all {
		for _, ev := range resp.Events {
			if k := string(ev.Kv.Key); k != NodeKey("a") && k != NodeKey("b") {
				t.Fatalf("whole keyspace reported %s", k)
			}
			if string(ev.Kv.Key) == NodeKey("b") {
				return
			}
		}
	}
	t.Fatal("whole keyspace: watch ended before node b")
}

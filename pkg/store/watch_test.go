package store

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchRange: a Dir watch sees every key under it and no other, from
// the revision asked; a Key watch sees its key only; the created notice
// carries the revision the watch starts at; CurrentRevision reads the
// store's revision.
func TestWatchRange(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	first, err := s.Txn(ctx(t), nil, PutValueOp(JoinKey("a"), "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx(t), nil, PutValueOp(RemovalKey("a"), "1"), PutValueOp(JoinKey("b"), "2")); err != nil {
		t.Fatal(err)
	}
	cur, err := CurrentRevision(ctx(t), s.Client(), ActiveOpKey)
	if err != nil || cur != first.Header.Revision+1 {
		t.Fatalf("CurrentRevision = %d, %v; want %d", cur, err, first.Header.Revision+1)
	}

	keys := func(ch clientv3.WatchChan, n int) []string {
		t.Helper()
		var out []string
		for resp := range ch {
			for _, ev := range resp.Events {
				out = append(out, string(ev.Kv.Key))
			}
			if len(out) >= n {
				return out
			}
		}
		t.Fatal("watch closed")
		return nil
	}
	wctx := ctx(t)
	if got := keys(WatchRange(wctx, s.Client(), Dir(JoinsDir), first.Header.Revision), 2); len(got) != 2 || got[0] != JoinKey("a") || got[1] != JoinKey("b") {
		t.Fatalf("dir watch from %d saw %v; want both joins and no removal", first.Header.Revision, got)
	}
	if got := keys(WatchRange(wctx, s.Client(), Key(JoinKey("b")), first.Header.Revision), 1); got[0] != JoinKey("b") {
		t.Fatalf("key watch saw %v", got)
	}

	ch := WatchRangeCreated(wctx, s.Client(), Key(JoinKey("a")), 0)
	created := <-ch
	if !created.Created || created.Header.Revision != cur {
		t.Fatalf("first response %+v: want the created notice at revision %d", created, cur)
	}
	if _, err := s.Txn(ctx(t), nil, PutValueOp(JoinKey("a"), "3")); err != nil {
		t.Fatal(err)
	}
	if got := keys(ch, 1); got[0] != JoinKey("a") {
		t.Fatalf("after the notice the watch saw %v", got)
	}
}

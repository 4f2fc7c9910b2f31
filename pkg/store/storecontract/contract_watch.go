package storecontract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchFromRevision: a watch of a directory from a past revision sees
// every event since, in order, those of one transaction at one revision;
// one made with WatchRangeCreated says first that it is in place.
func watchFromRevision(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, "d/a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, "elsewhere", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, nil, store.PutValueOp("d/b", "1"), store.PutValueOp("d/a", "2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Delete(ctx, "d/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("PUT d/a 1 @%d", start+1),
		fmt.Sprintf("PUT d/b 1 @%d", start+3), fmt.Sprintf("PUT d/a 2 @%d", start+3),
		fmt.Sprintf("DELETE d/a  @%d", start+4), fmt.Sprintf("DELETE d/b  @%d", start+4),
	}
	var got []string
	wait(t, ctx, store.WatchRange(ctx, s.Client(), store.Dir("d/"), start+1), func(resp clientv3.WatchResponse) bool {
		for _, ev := range resp.Events {
			got = append(got, fmt.Sprintf("%s %s %s @%d", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision))
		}
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}

	// From now on: created first, at the current revision, then the next
	// write of the key only.
	ch := store.WatchRangeCreated(ctx, s.Client(), store.Key("k"), 0)
	first := <-ch
	if !first.Created || first.Header.Revision != start+4 {
		t.Fatalf("first response: created %v at %d, want created at %d", first.Created, first.Header.Revision, start+4)
	}
	if _, err := s.Client().Put(ctx, "k2", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, "k", "x"); err != nil {
		t.Fatal(err)
	}
	wait(t, ctx, ch, func(resp clientv3.WatchResponse) bool {
		if len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != "k" || resp.Events[0].Kv.ModRevision != start+6 {
			t.Fatalf("watch of k: %v", resp.Events)
		}
		return true
	})
}

// watchSpan: WatchSpan reports the changes of several directories with
// the previous value of each key; a watch ends with its context.
func watchSpan(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	if _, err := s.Client().Put(ctx, "b/1", "old"); err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.ReadSpan(ctx, "a/", "c/")
	if err != nil {
		t.Fatal(err)
	}
	ch := s.WatchSpan(ctx, "a/", "c/", rev+1)
	for _, kv := range [][2]string{{"b/1", "new"}, {"c/1", "out"}, {"a/1", "in"}} {
		if _, err := s.Client().Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	var got []*clientv3.Event
	wait(t, ctx, ch, func(resp clientv3.WatchResponse) bool {
		got = append(got, resp.Events...)
		return len(got) >= 2
	})
	if len(got) != 2 || string(got[0].Kv.Key) != "b/1" || got[0].PrevKv == nil || string(got[0].PrevKv.Value) != "old" ||
		string(got[1].Kv.Key) != "a/1" || got[1].PrevKv != nil {
		t.Fatalf("span events: %v", got)
	}
	// A watch whose context ends closes its channel.
	wctx, cancel := context.WithCancel(ctx)
	wch := store.WatchRangeCreated(wctx, s.Client(), store.Key("a/1"), 0)
	if resp := <-wch; !resp.Created {
		t.Fatalf("first response %+v, want created", resp)
	}
	cancel()
	for {
		select {
		case _, ok := <-wch:
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("a canceled watch's channel stays open")
		}
	}
}

// compaction: once compacted at a revision, reads and watches from
// before it fail with ErrCompacted; from it on they still answer.
func compaction(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	r1, err := s.Client().Put(ctx, "k", "1")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Client().Put(ctx, "k", "2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, "k", "3"); err != nil {
		t.Fatal(err)
	}
	at := r2.Header.Revision
	if _, err := s.Client().Compact(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Compact(ctx, at); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("compacting again: %v, want ErrCompacted", err)
	}
	if _, err := s.GetKV(ctx, "k", clientv3.WithRev(r1.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read before the compaction: %v, want ErrCompacted", err)
	}
	if _, err := s.ViewAt(ctx, r1.Header.Revision, store.Key("k")); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("view before the compaction: %v, want ErrCompacted", err)
	}
	// A transaction that writes, then reads before the compaction,
	// fails whole.
	if _, err := s.Txn(ctx, nil, store.PutValueOp("k", "4"), clientv3.OpGet("k", clientv3.WithRev(r1.Header.Revision))); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("txn reading before the compaction: %v, want ErrCompacted", err)
	}
	if kv, err := s.GetKV(ctx, "k"); err != nil || string(kv.Value) != "3" {
		t.Fatalf("k after a failed transaction: %v (%v), want 3", kv, err)
	}
	v, err := s.ViewAt(ctx, at, store.Key("k"))
	if err != nil || string(v.Value("k")) != "2" {
		t.Fatalf("view at the compaction: %q %v, want 2", v.Value("k"), err)
	}
	var compacted int64
	ch := store.WatchRange(ctx, s.Client(), store.Key("k"), r1.Header.Revision)
	for resp := range ch {
		if resp.CompactRevision != 0 {
			compacted = resp.CompactRevision
			if !errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				t.Fatalf("compacted watch's error: %v", resp.Err())
			}
		}
	}
	if compacted != at {
		t.Fatalf("watch from before the compaction ended at compaction %d, want %d", compacted, at)
	}
	var seen []string
	wait(t, ctx, store.WatchRange(ctx, s.Client(), store.Key("k"), at), func(resp clientv3.WatchResponse) bool {
		for _, ev := range resp.Events {
			seen = append(seen, string(ev.Kv.Value))
		}
		return len(seen) >= 2
	})
	if !slices.Equal(seen, []string{"2", "3"}) {
		t.Fatalf("watch from the compaction saw %v, want [2 3]", seen)
	}
}

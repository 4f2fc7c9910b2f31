package storecontract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An Edge is the etcd a contract runs on.
type Edge struct {
	// NewClient returns a new client of the etcd, unscoped, closed when t
	// ends. Each case scopes its own under a prefix of its own, so cases
	// do not see each other's keys.
	NewClient func(t *testing.T) *clientv3.Client
	// Advance moves the etcd's lease clock on by d; nil on a real etcd,
	// whose leases expire in real time (the cases then wait, with TTLs of
	// a few seconds).
	Advance func(d time.Duration)
}

// Run runs every case of the contract on edge.
func Run(t *testing.T, edge Edge) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, edge Edge)
	}{
		{"objects", objects},
		{"ranges", ranges},
		{"view at one revision", viewAtOneRevision},
		{"transactions", transactions},
		{"watch from a revision", watchFromRevision},
		{"watch span with previous values", watchSpan},
		{"compaction", compaction},
		{"leased keys end with their lease", leasedKeys},
		{"election handover", electionHandover},
		{"fence lost with the session", fenceLost},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, edge) })
	}
}

// scoped returns a Store on a new client of edge, under a prefix named
// after t.
func scoped(t *testing.T, edge Edge) *store.Store {
	t.Helper()
	prefix := "/contract/" + strings.NewReplacer(" ", "-", "/", "-").Replace(t.Name()) + "/"
	s, err := store.New(edge.NewClient(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// objects: Create refuses an existing key, Update a changed one, Get an
// absent one; Put and Delete are unconditional; List is in key order at
// the revision it read.
func objects(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	n := api.NewNode("cp-1")
	if err := s.Create(ctx, store.NodeKey("cp-1"), n); err != nil {
		t.Fatal(err)
	}
	created := n.Metadata.Revision
	if err := s.Create(ctx, store.NodeKey("cp-1"), api.NewNode("cp-1")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	a, b := &api.Node{}, &api.Node{}
	for _, o := range []*api.Node{a, b} {
		if err := s.Get(ctx, store.NodeKey("cp-1"), o); err != nil {
			t.Fatal(err)
		}
	}
	if a.Metadata.Revision != created {
		t.Fatalf("read revision %d, created at %d", a.Metadata.Revision, created)
	}
	a.Status.Phase = api.NodeJoining
	if err := s.Update(ctx, store.NodeKey("cp-1"), a); err != nil {
		t.Fatal(err)
	}
	if a.Metadata.Revision <= created {
		t.Fatalf("update at revision %d, not after %d", a.Metadata.Revision, created)
	}
	b.Status.Phase = api.NodeFailed
	if err := s.Update(ctx, store.NodeKey("cp-1"), b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	for _, name := range []string{"cp-3", "cp-2"} {
		if err := s.Put(ctx, store.NodeKey(name), api.NewNode(name)); err != nil {
			t.Fatal(err)
		}
	}
	nodes, rev, err := store.List[api.Node](ctx, s, store.NodesDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Metadata.Name)
	}
	if want := []string{"cp-1", "cp-2", "cp-3"}; !slices.Equal(names, want) {
		t.Fatalf("list: %v, want %v", names, want)
	}
	if nodes[0].Status.Phase != api.NodeJoining {
		t.Fatalf("cp-1 phase %q: the stale write won", nodes[0].Status.Phase)
	}
	if cur, err := s.Revision(ctx); err != nil || cur != rev || nodes[1].Metadata.Revision != rev {
		t.Fatalf("list at %d, store at %d (%v), last put (cp-2) at %d", rev, cur, err, nodes[1].Metadata.Revision)
	}
	if err := s.Delete(ctx, store.NodeKey("cp-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.NodeKey("cp-2")); err != nil {
		t.Fatalf("deleting an absent key: %v", err)
	}
	if after, err := s.Revision(ctx); err != nil || after != rev+1 {
		t.Fatalf("revision after one deletion and one of nothing: %d (%v), want %d", after, err, rev+1)
	}
	if err := s.Get(ctx, store.NodeKey("cp-2"), &api.Node{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v, want ErrNotFound", err)
	}
	old := &api.Node{}
	if err := s.Get(ctx, store.NodeKey("cp-2"), old, clientv3.WithRev(rev)); err != nil || old.Metadata.Name != "cp-2" {
		t.Fatalf("get at %d, before the deletion: %v %v", rev, old.Metadata.Name, err)
	}
}

// ranges: the reads package store builds from range options (keys only,
// sorted with a limit, a span of directories, the first creation) answer
// as etcd does.
func ranges(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	var revs []int64
	for _, key := range []string{"a/2", "a/1", "b/1", "a/3", "c/1"} {
		resp, err := s.Client().Put(ctx, key, "v-"+key)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	if _, err := s.Client().Put(ctx, "a/2", "again"); err != nil {
		t.Fatal(err)
	}
	names, err := s.Names(ctx, "a/")
	if err != nil || len(names) != 3 || !names["1"] || !names["2"] || !names["3"] {
		t.Fatalf("names under a/: %v %v", names, err)
	}
	last, err := s.LastChange(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	if mod, err := s.ModRevision(ctx, "a/2"); err != nil || last != mod || mod <= revs[4] {
		t.Fatalf("last change under a/ %d, a/2 written at %d (%v), after %d", last, mod, err, revs[4])
	}
	kvs, _, err := s.ReadSpan(ctx, "a/2", "c/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, string(kv.Key))
	}
	if want := []string{"a/2", "a/3", "b/1"}; !slices.Equal(keys, want) {
		t.Fatalf("span a/2..c/: %v, want %v", keys, want)
	}
	if kvs[0].Version != 2 || kvs[0].CreateRevision != revs[0] || string(kvs[0].Value) != "again" {
		t.Fatalf("a/2: version %d created %d value %q, want 2, %d, again", kvs[0].Version, kvs[0].CreateRevision, kvs[0].Value, revs[0])
	}
	first, err := s.Client().Get(ctx, "a/", clientv3.WithFirstCreate()...)
	if err != nil || len(first.Kvs) != 1 || string(first.Kvs[0].Key) != "a/2" {
		t.Fatalf("first created under a/: %v %v", first, err)
	}
	count, err := s.Client().Get(ctx, "a/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || count.Count != 3 || len(count.Kvs) != 0 {
		t.Fatalf("count under a/: %v %v", count, err)
	}
	from, err := s.Client().Get(ctx, "b/", clientv3.WithFromKey(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil || len(from.Kvs) != 1 || string(from.Kvs[0].Key) != "b/1" || len(from.Kvs[0].Value) != 0 || !from.More || from.Count != 2 {
		t.Fatalf("from b/, keys only, limit 1: %v %v", from, err)
	}
	if _, err := s.Client().Get(ctx, "a/1", clientv3.WithRev(revs[4]+100)); err == nil {
		t.Fatal("a read at a future revision did not fail")
	}
}

// wait receives from ch until done says it has all it waits for; it fails
// t when ch closes first or ctx ends.
func wait(t *testing.T, ctx context.Context, ch clientv3.WatchChan, done func(clientv3.WatchResponse) bool) {
	t.Helper()
	for {
		select {
		case resp, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			if done(resp) {
				return
			}
		case <-ctx.Done():
			t.Fatal(fmt.Errorf("waiting on a watch: %w", ctx.Err()))
		}
	}
}

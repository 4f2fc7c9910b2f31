package storecontract

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// viewAtOneRevision: a View reads every range at one revision, ViewAt
// an older one as it was; a later write shows in View only.
func viewAtOneRevision(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	if _, err := s.Txn(ctx, nil, store.PutValueOp("d/a", "1"), store.PutValueOp("d/b", "1"), store.PutValueOp("k", "1")); err != nil {
		t.Fatal(err)
	}
	ranges := []store.Range{store.Key("k"), store.Dir("d/"), store.DirKeys("d/")}
	before, err := s.View(ctx, ranges...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, nil, store.PutValueOp("d/c", "2"), store.PutValueOp("k", "2"), store.DeleteOp("d/a")); err != nil {
		t.Fatal(err)
	}
	now, err := s.View(ctx, ranges...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ViewAt(ctx, before.Rev, ranges...)
	if err != nil {
		t.Fatal(err)
	}
	if now.Rev != before.Rev+1 || again.Rev != before.Rev {
		t.Fatalf("revisions: before %d, now %d, again %d", before.Rev, now.Rev, again.Rev)
	}
	for _, c := range []struct {
		v     *store.View
		k     string
		names string
	}{{before, "1", "a b"}, {again, "1", "a b"}, {now, "2", "b c"}} {
		if got := string(c.v.Value("k")); got != c.k {
			t.Errorf("view at %d: k = %q, want %q", c.v.Rev, got, c.k)
		}
		if got := names(c.v.Names(store.Dir("d/"))); got != c.names {
			t.Errorf("view at %d: d/ holds %q, want %q", c.v.Rev, got, c.names)
		}
		for _, kv := range c.v.KVs(store.DirKeys("d/")) {
			if len(kv.Value) != 0 || kv.ModRevision == 0 {
				t.Errorf("view at %d: keys-only %s has value %q, revision %d", c.v.Rev, kv.Key, kv.Value, kv.ModRevision)
			}
		}
	}
}

func names(m map[string]bool) string {
	out := ""
	for _, n := range []string{"a", "b", "c"} {
		if m[n] {
			out += " " + n
		}
	}
	if out == "" {
		return ""
	}
	return out[1:]
}

// transactions: comparisons on value, version, creation, modification
// and lease choose the branch; a failed one writes nothing; the reads of
// a transaction see its writes before them; TxnOrView reads either way.
func transactions(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	resp, err := s.Txn(ctx, []clientv3.Cmp{store.Absent("k")}, store.PutValueOp("k", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	for _, c := range []struct {
		name string
		cmp  clientv3.Cmp
		want bool
	}{
		{"value equal", store.ValueIs("k", "v1"), true},
		{"value differs", store.ValueIs("k", "v2"), false},
		{"value of an absent key", store.ValueIs("absent", ""), false},
		{"version", clientv3.Compare(clientv3.Version("k"), "=", 1), true},
		{"version greater", clientv3.Compare(clientv3.Version("k"), ">", 1), false},
		{"created at", clientv3.Compare(clientv3.CreateRevision("k"), "=", rev), true},
		{"modified before", clientv3.Compare(clientv3.ModRevision("k"), "<", rev), false},
		{"unchanged", store.Unchanged("k", rev), true},
		{"absent key unchanged since absent", store.Unchanged("absent", 0), true},
		{"no lease", clientv3.Compare(clientv3.LeaseValue("k"), "=", clientv3.NoLease), true},
		{"a lease", clientv3.Compare(clientv3.LeaseValue("k"), "!=", clientv3.NoLease), false},
	} {
		resp, err := s.TxnElse(ctx, []clientv3.Cmp{c.cmp}, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.Succeeded != c.want {
			t.Errorf("%s: succeeded %v, want %v", c.name, resp.Succeeded, c.want)
		}
	}
	before, _ := s.Revision(ctx)
	if _, err := s.Txn(ctx, []clientv3.Cmp{store.ValueIs("k", "nope")}, store.PutValueOp("other", "x")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("failed txn: %v, want ErrConflict", err)
	}
	if after, _ := s.Revision(ctx); after != before {
		t.Fatalf("a failed transaction moved the revision from %d to %d", before, after)
	}
	v, ok, err := s.TxnOrView(ctx, nil, []clientv3.Op{store.PutValueOp("d/x", "1")}, store.Dir("d/"))
	if err != nil {
		t.Fatal(err)
	}
	if kvs := v.KVs(store.Dir("d/")); !ok || len(kvs) != 1 || v.Rev != before+1 {
		t.Fatalf("txn or view: ok %v, view %v at %d (from %d)", ok, kvs, v.Rev, before)
	}
	// etcd refuses an operation bound to a lease that does not exist, and
	// applies none of the transaction's.
	if _, err := s.Txn(ctx, nil, store.PutValueOp("d/y", "1"), store.PutLeasedOp("d/z", "1", 0x123456)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put to no lease: %v, want ErrLeaseNotFound", err)
	}
	if v, err := s.View(ctx, store.Key("d/y")); err != nil || v.Has("d/y") {
		t.Fatalf("a refused transaction wrote d/y (%v)", err)
	}
}

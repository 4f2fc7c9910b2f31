package store

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
)

// TestRaw: GetUnder and GetUnderLocal read nico's keys through a client
// no store scopes, GetThrough a key as the client names it; CountAll counts every key of etcd; DeleteRawPrefix
// deletes keys outside the prefix through a scoped client, and only those.
func TestRaw(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	raw := etcdtest.NewClient(t, c.Endpoints()...)
	put, err := s.Txn(ctx(t), nil, PutValueOp(ClusterIDKey, "abc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/clusters/a/x", "/clusters/a/y", "/clusters/ab/x"} {
		if _, err := raw.Put(ctx(t), k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	kv, rev, err := GetUnder(ctx(t), raw, DefaultPrefix, ClusterIDKey)
	if err != nil || kv == nil || string(kv.Value) != "abc" || rev != put.Header.Revision+3 {
		t.Fatalf("GetUnder = %v at %d, %v", kv, rev, err)
	}
	if kv, _, err := GetUnderLocal(ctx(t), raw, DefaultPrefix, ClusterIDKey); err != nil || kv == nil || kv.ModRevision != put.Header.Revision {
		t.Fatalf("GetUnderLocal = %v, %v", kv, err)
	}
	if kv, rev, err := GetUnder(ctx(t), raw, DefaultPrefix, ActiveOpKey); err != nil || kv != nil || rev == 0 {
		t.Fatalf("GetUnder of an absent key = %v at %d, %v; want nil at the current revision", kv, rev, err)
	}
	if kv, _, err := GetThrough(ctx(t), s.Client(), ClusterIDKey); err != nil || kv == nil || string(kv.Key) != ClusterIDKey {
		t.Fatalf("GetThrough a store's client = %v, %v; want the key under its prefix", kv, err)
	}
	if kv, _, err := GetThrough(ctx(t), raw, "/clusters/a/x"); err != nil || kv == nil {
		t.Fatalf("GetThrough an unscoped client = %v, %v", kv, err)
	}
	if n, rev, err := CountAll(ctx(t), raw); err != nil || n != 4 || rev != put.Header.Revision+3 {
		t.Fatalf("CountAll = %d at %d, %v; want 4 keys", n, rev, err)
	}
	if err := DeleteRawPrefix(ctx(t), s.Client(), "/clusters/a/"); err != nil {
		t.Fatal(err)
	}
	if n, _, err := CountAll(ctx(t), raw); err != nil || n != 2 {
		t.Fatalf("after DeleteRawPrefix: %d keys, %v; want /clusters/ab/x and the cluster ID left", n, err)
	}
}

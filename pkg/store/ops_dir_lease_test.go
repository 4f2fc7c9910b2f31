package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestKeyspaceOps: the plain operations and comparisons write, delete and
// compare what they say; ModRevision reads a key's last write, and
// ErrNotFound when it is absent.
func TestKeyspaceOps(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	lease, err := s.Client().Grant(ctx(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Txn(ctx(t), []clientv3.Cmp{Absent(ActiveOpKey)},
		PutValueOp(ActiveOpKey, "op-1"), PutValueOp(JoinKey("a"), "x"), PutValueOp(JoinKey("b"), "y"),
		PutLeasedOp(JoinNonceKey("n"), "", lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	if rev, err := s.ModRevision(ctx(t), ActiveOpKey); err != nil || rev != resp.Header.Revision {
		t.Fatalf("ModRevision = %d, %v; want %d", rev, err, resp.Header.Revision)
	}
	if _, err := s.ModRevision(ctx(t), ActiveOpKey+"-none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ModRevision of an absent key: %v, want ErrNotFound", err)
	}
	if kv, err := s.GetKV(ctx(t), JoinNonceKey("n")); err != nil || kv.Lease != int64(lease.ID) {
		t.Fatalf("leased key %v, %v: want it on lease %x", kv, err, lease.ID)
	}

	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "op-2")}, DeleteOp(ActiveOpKey)); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete guarded by another value: %v, want ErrConflict", err)
	}
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "op-1")}, DeleteOp(ActiveOpKey), DeleteDirOp(JoinsDir)); err != nil {
		t.Fatal(err)
	}
	v, err := s.View(ctx(t), Key(ActiveOpKey), DirKeys(JoinsDir))
	if err != nil {
		t.Fatal(err)
	}
	if v.Has(ActiveOpKey) || len(v.Names(DirKeys(JoinsDir))) != 0 {
		t.Fatalf("after the deletes: active op %q, joins %v", v.Value(ActiveOpKey), v.Names(DirKeys(JoinsDir)))
	}
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "")}, DeleteOp(ActiveOpKey)); !errors.Is(err, ErrConflict) {
		t.Fatalf("an absent key compared to the empty value: %v, want ErrConflict", err)
	}
}

package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestValueOps: PutValueOp writes a plain value and DeleteOp removes a
// key, present or absent, in one transaction.
func TestValueOps(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	if _, err := s.Txn(ctx(t), nil, PutValueOp(ActiveOpKey, "op-1"), PutValueOp(ClusterClaimKey("m"), "k")); err != nil {
		t.Fatal(err)
	}
	v, err := s.View(ctx(t), Key(ActiveOpKey), Key(ClusterClaimKey("m")))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(v.Value(ActiveOpKey)); got != "op-1" {
		t.Fatalf("active op %q, want op-1", got)
	}
	if got := string(v.Value(ClusterClaimKey("m"))); got != "k" {
		t.Fatalf("claim %q, want k", got)
	}
	if _, err := s.Txn(ctx(t), nil, DeleteOp(ActiveOpKey), DeleteOp(ClusterClaimKey("absent"))); err != nil {
		t.Fatal(err)
	}
	if v, err = s.View(ctx(t), Key(ActiveOpKey), Key(ClusterClaimKey("m"))); err != nil {
		t.Fatal(err)
	}
	if v.Has(ActiveOpKey) || !v.Has(ClusterClaimKey("m")) {
		t.Fatalf("after delete: active op there %v, claim there %v; want false, true", v.Has(ActiveOpKey), v.Has(ClusterClaimKey("m")))
	}
}

// TestValueIs: ValueIs holds on the exact value and fails on another or
// on an absent key.
func TestValueIs(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "")}, PutValueOp(NudgeKey, "x")); !errors.Is(err, ErrConflict) {
		t.Fatalf("absent key: %v, want ErrConflict", err)
	}
	if _, err := s.Txn(ctx(t), nil, PutValueOp(ActiveOpKey, "op-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "op-2")}, PutValueOp(NudgeKey, "x")); !errors.Is(err, ErrConflict) {
		t.Fatalf("another value: %v, want ErrConflict", err)
	}
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{ValueIs(ActiveOpKey, "op-1")}, PutValueOp(NudgeKey, "x")); err != nil {
		t.Fatalf("the value: %v, want the write", err)
	}
}

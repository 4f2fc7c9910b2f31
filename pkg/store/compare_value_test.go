package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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

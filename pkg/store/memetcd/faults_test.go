package memetcd_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// faultyStore returns a Store over a memory etcd whose client fs wraps.
func faultyStore(t *testing.T) (*store.Store, *memetcd.Faults) {
	_, _, newClient := newEtcd(t)
	s, err := store.New(newClient(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	fs := &memetcd.Faults{}
	fs.Wrap(s.Client())
	return s, fs
}

// TestFaultsByKind: a fault of one kind fails those operations only, its
// Times of them, with its error as the store wraps it.
func TestFaultsByKind(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Kinds: memetcd.Put, Times: 1, Err: rpctypes.ErrNoSpace})
	if err := s.Put(ctx, store.NodeKey("a"), api.NewNode("a")); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("put: %v, want ErrNoSpace", err)
	}
	if err := s.Create(ctx, store.NodeKey("a"), api.NewNode("a")); err != nil {
		t.Fatalf("create is a txn, not a put: %v", err)
	}
	if err := s.Put(ctx, store.NodeKey("b"), api.NewNode("b")); err != nil {
		t.Fatalf("second put, the fault spent: %v", err)
	}
	if err := s.Get(ctx, store.NodeKey("a"), &api.Node{}); err != nil {
		t.Fatal(err)
	}
	if n := fs.Failed(); n != 1 {
		t.Fatalf("failed %d operations, want 1", n)
	}
}

// TestFaultsByPrefix: a fault of a prefix fails the transactions that
// touch a key under it, whatever other keys they hold, until cleared.
func TestFaultsByPrefix(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Prefix: store.OpsDir, Err: context.DeadlineExceeded})
	if _, err := s.Txn(ctx, nil, store.PutValueOp(store.NodeKey("a"), "x"), store.PutValueOp(store.OpKey("op-1"), "x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("txn under ops/: %v, want DeadlineExceeded", err)
	}
	if _, err := s.TxnElse(ctx, []clientv3.Cmp{store.Absent(store.NodeKey("a"))}, nil, []clientv3.Op{clientv3.OpTxn(nil, nil, []clientv3.Op{store.DeleteOp(store.OpKey("x"))})}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("txn with ops/ in a nested else: %v, want DeadlineExceeded", err)
	}
	if _, err := s.Txn(ctx, nil, store.PutValueOp(store.NodeKey("a"), "x")); err != nil {
		t.Fatalf("txn outside ops/: %v", err)
	}
	fs.Clear()
	if _, err := s.Txn(ctx, nil, store.PutValueOp(store.OpKey("op-1"), "x")); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

// TestFaultsAfter: a fault lets its first After matching operations
// through, fails the next Times, then passes again.
func TestFaultsAfter(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Kinds: memetcd.Get | memetcd.Txn, After: 2, Times: 2, Err: memetcd.ErrUnavailable})
	var got []bool
	for range 6 {
		_, err := s.Revision(ctx)
		got = append(got, err != nil)
		if err != nil && !errors.Is(err, memetcd.ErrUnavailable) {
			t.Fatalf("error %v, want ErrUnavailable", err)
		}
	}
	if want := []bool{false, false, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("failed %v, want %v", got, want)
	}
}

// TestFaultsApplied: a fault with Applied returns its error from a put
// and a transaction that ran anyway, as an answer lost after etcd applied
// the request.
func TestFaultsApplied(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Kinds: memetcd.Put | memetcd.Txn, Times: 2, Err: rpctypes.ErrTimeout, Applied: true})
	if err := s.Put(ctx, store.NodeKey("a"), api.NewNode("a")); !errors.Is(err, rpctypes.ErrTimeout) {
		t.Fatalf("put: %v, want ErrTimeout", err)
	}
	if err := s.Get(ctx, store.NodeKey("a"), &api.Node{}); err != nil {
		t.Fatalf("the put whose answer was lost is not there: %v", err)
	}
	if _, err := s.Txn(ctx, []clientv3.Cmp{store.Absent(store.NodeKey("b"))}, store.PutValueOp(store.NodeKey("b"), "{}")); !errors.Is(err, rpctypes.ErrTimeout) {
		t.Fatalf("txn: %v, want ErrTimeout", err)
	}
	names, err := s.Names(ctx, store.NodesDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || !names["a"] || !names["b"] {
		t.Fatalf("nodes %v after two applied failures, want a and b", names)
	}
}

// TestFaultsWatch: a failed watch's channel closes at once; the next
// watch works.
func TestFaultsWatch(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Kinds: memetcd.Watch, Times: 1, Err: memetcd.ErrUnavailable})
	if _, ok := <-s.Watch(ctx, "k", 0); ok {
		t.Fatal("a failed watch delivered a response")
	}
	ch := store.WatchRangeCreated(ctx, s.Client(), store.Key("k"), 0)
	if resp := <-ch; !resp.Created {
		t.Fatalf("second watch: %+v, want created", resp)
	}
}

// TestFaultsLease: a lease fault fails a grant; a failed keep-alive's
// channel closes at once; the next grant works.
func TestFaultsLease(t *testing.T) {
	s, fs := faultyStore(t)
	ctx := t.Context()
	fs.Add(memetcd.Fault{Kinds: memetcd.Lease, Times: 2, Err: memetcd.ErrUnavailable})
	if _, err := s.Client().Grant(ctx, 10); !errors.Is(err, memetcd.ErrUnavailable) {
		t.Fatalf("grant: %v, want ErrUnavailable", err)
	}
	ch, err := s.Client().KeepAlive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("a failed keep-alive delivered a response")
	}
	if _, err := s.Client().Grant(ctx, 10); err != nil {
		t.Fatalf("grant after the fault: %v", err)
	}
}

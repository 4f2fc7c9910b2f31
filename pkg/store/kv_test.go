package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func TestKVs(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	if _, err := s.GetKV(ctx(t), "secrets/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent: %v, want ErrNotFound", err)
	}
	resp, err := s.Txn(ctx(t), []clientv3.Cmp{Absent("secrets/a")}, clientv3.OpPut("secrets/a", "1"), clientv3.OpPut("secrets/b", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx(t), []clientv3.Cmp{Absent("secrets/a")}, clientv3.OpPut("secrets/a", "3")); !errors.Is(err, ErrConflict) {
		t.Fatalf("failed comparison: %v, want ErrConflict", err)
	}
	kv, err := s.GetKV(ctx(t), "secrets/a")
	if err != nil || string(kv.Value) != "1" || kv.ModRevision != resp.Header.Revision {
		t.Fatalf("get: %v, %v", kv, err)
	}
	kvs, rev, err := s.ListKVs(ctx(t), "secrets/")
	if err != nil || len(kvs) != 2 || rev != resp.Header.Revision {
		t.Fatalf("list: %d at %d, %v", len(kvs), rev, err)
	}
	if now, err := s.Revision(ctx(t)); err != nil || now != rev {
		t.Fatalf("revision %d, %v; want %d", now, err, rev)
	}

	// A watch from a revision reports every change since.
	if _, err := s.Txn(ctx(t), nil, clientv3.OpPut("secrets/a", "4")); err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx(t), "secrets/a", rev)
	var seen []string
	for len(seen) < 2 {
		wr, ok := <-w
		if !ok || wr.Err() != nil {
			t.Fatalf("watch ended: %v", wr.Err())
		}
		for _, ev := range wr.Events {
			seen = append(seen, string(ev.Kv.Value))
		}
	}
	if seen[0] != "1" || seen[1] != "4" {
		t.Fatalf("watched %v, want [1 4]", seen)
	}
}

func TestLeader(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	if name, err := s.Leader(ctx(t)); err != nil || name != "" {
		t.Fatalf("nobody campaigns: %q, %v", name, err)
	}
	var sessions []*concurrency.Session
	for _, name := range []string{"c-1", "c-2"} {
		sess, err := concurrency.NewSession(s.Client())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		sessions = append(sessions, sess)
		if name == "c-1" {
			if err := concurrency.NewElection(sess, ElectionPrefix).Campaign(ctx(t), name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// c-2 campaigns behind c-1: its key exists, it is not the leader.
		go func() { _ = concurrency.NewElection(sess, ElectionPrefix).Campaign(sess.Ctx(), name) }()
	}
	if name, err := s.Leader(ctx(t)); err != nil || name != "c-1" {
		t.Fatalf("leader %q, %v; want c-1", name, err)
	}
	sessions[0].Close()
	for {
		name, err := s.Leader(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if name == "c-2" {
			break
		}
		if ctx(t).Err() != nil {
			t.Fatalf("leader still %q after c-1 resigned", name)
		}
	}
}

func TestActiveOp(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	if op, err := s.ActiveOp(ctx(t)); err != nil || op != nil {
		t.Fatalf("none in flight: %v, %v", op, err)
	}
	op := api.NewOperation("join-cp-2-1")
	put, err := PutObjectOp(op)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Txn(ctx(t), nil, put, clientv3.OpPut(ActiveOpKey, op.Metadata.Name))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ActiveOp(ctx(t))
	if err != nil || got == nil || got.Metadata.Name != op.Metadata.Name || got.Metadata.Revision != resp.Header.Revision {
		t.Fatalf("active %+v, %v", got, err)
	}
	// The journal entry is read at the revision the slot was read at.
	op.Status.Phase = api.OpSucceeded
	if err := s.PutObject(ctx(t), op); err != nil {
		t.Fatal(err)
	}
	then, err := s.OpAt(ctx(t), op.Metadata.Name, resp.Header.Revision)
	if err != nil || then.Status.Phase == api.OpSucceeded {
		t.Fatalf("at revision %d: %+v, %v", resp.Header.Revision, then, err)
	}
	if _, err := s.OpAt(ctx(t), "nothing", resp.Header.Revision); err == nil {
		t.Fatal("an operation with no journal entry read without error")
	}
}

package store

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestAlive(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	lease, err := s.Client().Grant(ctx(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-1", "dp-1"} {
		if _, err := s.Client().Put(ctx(t), HeartbeatKey(n), "t", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	alive, rev, err := s.Alive(ctx(t))
	if err != nil || len(alive) != 2 || !alive["cp-1"] || !alive["dp-1"] {
		t.Fatalf("alive %v, %v", alive, err)
	}
	if _, err := s.Client().Revoke(ctx(t), lease.ID); err != nil {
		t.Fatal(err)
	}
	if now, _, err := s.Alive(ctx(t)); err != nil || len(now) != 0 {
		t.Fatalf("after the lease ended: %v, %v", now, err)
	}
	// At the earlier revision both are still there.
	if then, at, err := s.Alive(ctx(t), clientv3.WithRev(rev)); err != nil || len(then) != 2 || at < rev {
		t.Fatalf("at revision %d: %v (read at %d), %v", rev, then, at, err)
	}
}

func TestAliveOpInTxn(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	lease, err := s.Client().Grant(ctx(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx(t), HeartbeatKey("cp-1"), "t", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Txn(ctx(t), nil, AliveOp(), clientv3.OpGet(NodesDir, clientv3.WithPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	alive := AliveIn(resp.Responses[0].GetResponseRange().GetKvs())
	if len(alive) != 1 || !alive["cp-1"] {
		t.Fatalf("alive in a txn: %v", alive)
	}
}

package store

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestNamesAndLastChange(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	if last, err := s.LastChange(ctx(t), JoinsDir); err != nil || last != 0 {
		t.Fatalf("empty dir: %d, %v", last, err)
	}
	var revs []int64
	for _, n := range []string{"a", "b"} {
		resp, err := s.Client().Put(ctx(t), JoinKey(n), "{}")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	if _, err := s.Client().Put(ctx(t), NodeKey("x"), "{}"); err != nil {
		t.Fatal(err)
	}
	names, err := s.Names(ctx(t), JoinsDir)
	if err != nil || len(names) != 2 || !names["a"] || !names["b"] {
		t.Fatalf("names %v, %v", names, err)
	}
	if last, err := s.LastChange(ctx(t), JoinsDir); err != nil || last != revs[1] {
		t.Fatalf("last change %d, want %d (%v)", last, revs[1], err)
	}
}

func TestHeartbeatLease(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	if _, ok, err := s.HeartbeatLease(ctx(t), "cp-1"); err != nil || ok {
		t.Fatalf("no heartbeat: %v, %v", ok, err)
	}
	g, err := s.Client().Grant(ctx(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutHeartbeat(ctx(t), "cp-1", time.Now(), g.ID); err != nil {
		t.Fatal(err)
	}
	if lease, ok, err := s.HeartbeatLease(ctx(t), "cp-1"); err != nil || !ok || lease != g.ID {
		t.Fatalf("lease %x ok %v, want %x (%v)", lease, ok, g.ID, err)
	}
	if alive, _, _ := s.Alive(ctx(t)); !alive["cp-1"] {
		t.Fatalf("not alive: %v", alive)
	}
	if _, err := s.Client().Revoke(ctx(t), g.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHeartbeat(ctx(t), "cp-1", time.Now(), g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put on an ended lease: %v", err)
	}
}

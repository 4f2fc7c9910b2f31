package storecontract

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// shortTTL is the TTL, in seconds, of the leases a case lets expire, and
// expire how far a case moves the clock for them to (a real etcd's own
// minimum TTL is about two seconds).
const (
	shortTTL = 2
	expire   = (shortTTL + 1) * time.Second
)

func advance(edge Edge, d time.Duration) {
	if edge.Advance != nil {
		edge.Advance(d)
	}
}

// waitDeleted waits, through a watch from rev, until key is deleted.
func waitDeleted(t *testing.T, s *store.Store, key string, rev int64) {
	t.Helper()
	ctx := testCtx(t)
	wait(t, ctx, store.WatchRange(ctx, s.Client(), store.Key(key), rev), func(resp clientv3.WatchResponse) bool {
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				return true
			}
		}
		return false
	})
}

// leasedKeys: a key bound to a lease goes, with a deletion event, when
// the lease expires un-renewed or is revoked; a kept-alive lease stays;
// a put to an ended lease fails with ErrLeaseNotFound.
func leasedKeys(t *testing.T, edge Edge) {
	s, ctx := scoped(t, edge), testCtx(t)
	short, err := s.Client().Grant(ctx, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	// kept outlives short's expiry, and a second such wait only when it
	// is kept alive in between.
	const keptTTL = 10
	step := (keptTTL - 2) * time.Second
	kept, err := s.Client().Grant(ctx, keptTTL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for node, id := range map[string]clientv3.LeaseID{"short": short.ID, "kept": kept.ID} {
		if err := s.PutHeartbeat(ctx, node, now, id); err != nil {
			t.Fatal(err)
		}
	}
	alive, rev, err := s.Alive(ctx)
	if err != nil || len(alive) != 2 {
		t.Fatalf("alive %v (%v), want short and kept", alive, err)
	}
	advance(edge, step)
	waitDeleted(t, s, store.HeartbeatKey("short"), rev)
	if ka, err := s.Client().KeepAliveOnce(ctx, kept.ID); err != nil || ka.TTL <= 0 {
		t.Fatalf("keep-alive of the kept lease: %v %v", ka, err)
	}
	advance(edge, step)
	if alive, _, err := s.Alive(ctx); err != nil || len(alive) != 1 || !alive["kept"] {
		t.Fatalf("alive after the short lease expired: %v (%v), want kept", alive, err)
	}
	if ttl, err := s.Client().TimeToLive(ctx, short.ID); err != nil || ttl.TTL != -1 {
		t.Fatalf("time to live of an expired lease: %v %v, want -1", ttl, err)
	}
	if err := s.PutHeartbeat(ctx, "short", now, short.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("heartbeat on an expired lease: %v, want ErrLeaseNotFound", err)
	}
	if _, err := s.Client().KeepAliveOnce(ctx, short.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("keep-alive of an expired lease: %v, want ErrLeaseNotFound", err)
	}
	ttl, err := s.Client().TimeToLive(ctx, kept.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.GrantedTTL != keptTTL || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != store.HeartbeatKey("kept") {
		t.Fatalf("time to live of the kept lease: %+v %v", ttl, err)
	}
	if _, err := s.Client().Revoke(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	if alive, _, err := s.Alive(ctx); err != nil || len(alive) != 0 {
		t.Fatalf("alive after the revocation: %v (%v), want none", alive, err)
	}
}

func session(t *testing.T, s *store.Store, ttl int) *concurrency.Session {
	t.Helper()
	sess, err := concurrency.NewSession(s.Client(), concurrency.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// electionHandover: the first to campaign leads; a second waits until
// the first resigns, then leads; Leader names who leads.
func electionHandover(t *testing.T, edge Edge) {
	a, b := scoped(t, edge), scoped(t, edge)
	ctx := testCtx(t)
	ea := concurrency.NewElection(session(t, a, 600), store.ElectionPrefix)
	eb := concurrency.NewElection(session(t, b, 600), store.ElectionPrefix)
	if err := ea.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	rev, err := a.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- eb.Campaign(ctx, "b") }()
	// b's campaign key is written: b waits behind a.
	wait(t, ctx, store.WatchRange(ctx, a.Client(), store.Dir(store.ElectionPrefix), rev+1), func(resp clientv3.WatchResponse) bool {
		return len(resp.Events) > 0 && string(resp.Events[0].Kv.Value) == "b"
	})
	select {
	case err := <-won:
		t.Fatalf("b won while a leads (%v)", err)
	default:
	}
	if who, err := b.Leader(ctx); err != nil || who != "a" {
		t.Fatalf("leader %q (%v), want a", who, err)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatalf("b's campaign: %v", err)
	}
	if who, err := a.Leader(ctx); err != nil || who != "b" {
		t.Fatalf("leader %q (%v), want b", who, err)
	}
	octx, stop := context.WithCancel(ctx)
	obs := ea.Observe(octx)
	first := <-obs
	stop()
	for range obs { // the observer ends before its client closes
	}
	if len(first.Kvs) != 1 || string(first.Kvs[0].Value) != "b" {
		t.Fatalf("observed %v, want b", first.Kvs)
	}
}

var errGuard = errors.New("storecontract: guard failed")

// fenceLost: a fenced write commits while the leader's key stands, fails
// with a guard's error when a guard does not hold, and with ErrNotLeader
// once the leader's session lease expired; the next leader's fence is
// another.
func fenceLost(t *testing.T, edge Edge) {
	a, b := scoped(t, edge), scoped(t, edge)
	ctx := testCtx(t)
	sa := session(t, a, shortTTL)
	ea := concurrency.NewElection(sa, store.ElectionPrefix)
	if err := ea.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	fence := store.Fence{Key: ea.Key(), Rev: ea.Rev()}
	if _, err := a.FencedTxn(ctx, fence, nil, store.PutValueOp("decision", "1")); err != nil {
		t.Fatalf("fenced write of the leader: %v", err)
	}
	guard := store.Guard{Cmp: store.ValueIs("decision", "2"), Err: errGuard}
	if _, err := a.FencedTxn(ctx, fence, []store.Guard{guard}, store.PutValueOp("decision", "3")); !errors.Is(err, errGuard) {
		t.Fatalf("fenced write with a failing guard: %v, want the guard's error", err)
	}
	// Keep-alives stop and the lease runs out. A keep-alive the client
	// sent just before may land after a clock step and renew the lease
	// once: on a moved clock, step until the key is gone.
	sa.Orphan()
	for i := 0; edge.Advance != nil; i++ {
		edge.Advance(expire)
		if _, err := a.GetKV(ctx, fence.Key); errors.Is(err, store.ErrNotFound) {
			break
		} else if i == 3 {
			t.Fatalf("the leader's key after %d clock steps past its TTL: %v", i+1, err)
		}
	}
	waitDeleted(t, a, fence.Key, fence.Rev)
	if _, err := a.FencedTxn(ctx, fence, nil, store.PutValueOp("decision", "4")); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("fenced write after the lease expired: %v, want ErrNotLeader", err)
	}
	eb := concurrency.NewElection(session(t, b, 600), store.ElectionPrefix)
	if err := eb.Campaign(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	next := store.Fence{Key: eb.Key(), Rev: eb.Rev()}
	if next == fence {
		t.Fatalf("the next leader's fence is the last one's: %v", next)
	}
	if _, err := a.FencedTxn(ctx, fence, nil, store.PutValueOp("decision", "5")); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("the old leader's write under a new leader: %v, want ErrNotLeader", err)
	}
	if kv, err := b.GetKV(ctx, "decision"); err != nil || string(kv.Value) != "1" {
		t.Fatalf("decision %v (%v), want 1: a refused write landed", kv, err)
	}
}

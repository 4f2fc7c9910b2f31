package memetcd_test

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLeaseExpiresOnTheClock: moving the clock past a lease's TTL
// deletes its keys by itself, with no request after: a watch already in
// place sees the deletion.
func TestLeaseExpiresOnTheClock(t *testing.T) {
	_, clock, newClient := newEtcd(t)
	cli := newClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	ch := cli.Watch(ctx, "k", clientv3.WithCreatedNotify())
	if resp := <-ch; !resp.Created {
		t.Fatalf("first response %+v, want created", resp)
	}
	clock.Advance(4 * time.Second)
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("k before the TTL: %v %v", resp, err)
	}
	clock.Advance(time.Second)
	select {
	case resp := <-ch:
		if len(resp.Events) != 1 || resp.Events[0].Type != mvccpb.DELETE {
			t.Fatalf("events %v, want k's deletion", resp.Events)
		}
	case <-ctx.Done():
		t.Fatal("no deletion after the lease's TTL")
	}
}

// TestClosed: once the etcd is closed every request fails as unavailable.
func TestClosed(t *testing.T) {
	e, _, newClient := newEtcd(t)
	cli := newClient(t)
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "k"); status.Code(err) != codes.Unavailable {
		t.Fatalf("get after close: %v, want Unavailable", err)
	}
}

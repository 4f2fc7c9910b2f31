package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestPutOnLease: an object written on a lease goes when the lease is
// revoked; on lease 0 it stays; on a lease etcd does not have, nothing is
// written.
func TestPutOnLease(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	g, err := s.Client().Grant(ctx(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	on, off := api.NewComponentReport("on"), api.NewComponentReport("off")
	if err := s.PutOnLease(ctx(t), on, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.PutOnLease(ctx(t), off, 0); err != nil {
		t.Fatal(err)
	}
	kv, err := s.GetKV(ctx(t), ComponentReportKey("on"))
	if err != nil || kv.Lease != int64(g.ID) {
		t.Fatalf("report on the lease: %v %v, want lease %x", kv, err, g.ID)
	}
	if _, err := s.Client().Revoke(ctx(t), g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetKV(ctx(t), ComponentReportKey("on")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("report after its lease was revoked: %v, want ErrNotFound", err)
	}
	if _, err := s.GetKV(ctx(t), ComponentReportKey("off")); err != nil {
		t.Fatalf("report on no lease: %v", err)
	}
	again := api.NewComponentReport("again")
	if err := s.PutOnLease(ctx(t), again, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put on a revoked lease: %v, want ErrLeaseNotFound", err)
	}
	if _, err := s.GetKV(ctx(t), ComponentReportKey("again")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("report put on a revoked lease: %v, want none", err)
	}
}

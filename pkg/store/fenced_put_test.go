package store

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestPutUnchanged: a write of an object as read lands; one of a copy
// read before another write fails with ErrConflict, as does any write
// once the fence is gone (ErrNotLeader).
func TestPutUnchanged(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	resp, err := s.Client().Put(ctx(t), "fence", "")
	if err != nil {
		t.Fatal(err)
	}
	fence := Fence{Key: "fence", Rev: resp.Header.Revision}
	m := api.NewMachine("web-0")
	if _, err := s.PutUnchanged(ctx(t), fence, m); err != nil {
		t.Fatalf("create: %v", err)
	}
	read := &api.Machine{}
	if err := s.Get(ctx(t), MachineKey("web-0"), read); err != nil {
		t.Fatal(err)
	}
	stale := *read
	read.Spec.Pool = "web"
	if _, err := s.PutUnchanged(ctx(t), fence, read); err != nil {
		t.Fatalf("update as read: %v", err)
	}
	stale.Spec.Pool = "other"
	if _, err := s.PutUnchanged(ctx(t), fence, &stale); !errors.Is(err, ErrConflict) {
		t.Fatalf("update of a stale copy: %v, want ErrConflict", err)
	}
	got := &api.Machine{}
	if err := s.Get(ctx(t), MachineKey("web-0"), got); err != nil || got.Spec.Pool != "web" {
		t.Fatalf("read back %+v, %v; want pool web", got.Spec, err)
	}
	if _, err := s.Client().Delete(ctx(t), "fence"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutUnchanged(ctx(t), fence, got); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write without the fence: %v, want ErrNotLeader", err)
	}
}

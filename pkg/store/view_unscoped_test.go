package store

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestValueUnscoped: a key a Store wrote under its prefix reads back
// through a client that is not scoped, given the prefix; an absent key
// is not ok.
func TestValueUnscoped(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	ec := api.NewEtcdCluster()
	if err := s.PutObject(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	want, err := s.GetKV(ctx(t), EtcdClusterKey)
	if err != nil {
		t.Fatal(err)
	}
	raw := etcdtest.NewClient(t, c.Endpoints()...)
	got, ok, err := ValueUnscoped(ctx(t), raw, DefaultPrefix, EtcdClusterKey)
	if err != nil || !ok || string(got) != string(want.Value) {
		t.Fatalf("ValueUnscoped = %q %v %v, want %q", got, ok, err, want.Value)
	}
	if _, ok, err := ValueUnscoped(ctx(t), raw, DefaultPrefix, LivenessKey); ok || err != nil {
		t.Fatalf("absent key: %v %v, want false, nil", ok, err)
	}
	if _, ok, err := ValueUnscoped(ctx(t), raw, "/other/", EtcdClusterKey); ok || err != nil {
		t.Fatalf("another prefix: %v %v, want false, nil", ok, err)
	}
}

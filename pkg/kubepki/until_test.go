package kubepki_test

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
)

// TestEnsureUntil: Ensure reports when its secrets first fall due by the
// clock; an Ensure before then changes nothing, one after renews. A
// cache that trusts Until (the coordinator's) skips no renewal.
func TestEnsureUntil(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://k8s.example:6443", Machines: []string{"cp-1"}, NicoCA: etcdtest.PKI(t)}
	res, err := kubepki.Ensure(ctx, e.sec, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	until := res.Until
	// The leaves live LeafValidity, the token BootstrapTokenTTL: the
	// first to fall due does at two thirds of the shorter.
	if want := t0.Add(min(kubepki.LeafValidity, kubepki.BootstrapTokenTTL) * 2 / 3); until.After(want) || until.Before(want.Add(-time.Hour)) {
		t.Fatalf("until %s, want about %s", until, want)
	}
	res, err = kubepki.Ensure(ctx, e.sec, c, until.Add(-time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created)+len(res.Renewed)+len(res.Rotated)+len(res.Deleted) > 0 {
		t.Fatalf("Ensure before until changed %+v", res)
	}
	if !res.Until.Equal(until) {
		t.Errorf("until moved with nothing changed: %s, was %s", res.Until, until)
	}
	res, err = kubepki.Ensure(ctx, e.sec, c, until.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Renewed)+len(res.Rotated) == 0 {
		t.Fatalf("Ensure past until renewed nothing: %+v", res)
	}
	if !res.Until.After(until.Add(2 * time.Second)) {
		t.Errorf("until after renewal %s, want later than the renewal", res.Until)
	}
}

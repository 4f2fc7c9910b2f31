package coordinator

import (
	"testing"

	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// memClient returns a client of a memory etcd (package memetcd) whose
// leases expire by clk, both closed when t ends. A test whose controller
// clock moves by more than a session's TTL gives the etcd a clock of its
// own, so that the leader's session does not expire with it.
func memClient(t *testing.T, clk clockwork.Clock) *clientv3.Client {
	t.Helper()
	e := memetcd.New(clk)
	t.Cleanup(e.Close)
	cli := e.Client()
	t.Cleanup(func() { cli.Close() })
	return cli
}

// memStore returns a Store over a memory etcd on a clock of its own
// (memClient).
func memStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(memClient(t, clockwork.NewFakeClock()), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

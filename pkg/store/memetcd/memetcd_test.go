package memetcd_test

import (
	"testing"

	"github.com/homystack/nico/pkg/store/memetcd"
	"github.com/homystack/nico/pkg/store/storecontract"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// clients' watch and keep-alive loops end when they close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newEtcd returns an Etcd on a fake clock, closed when t ends, and a
// client maker for the contract.
func newEtcd(t *testing.T) (*memetcd.Etcd, *clockwork.FakeClock, func(t *testing.T) *clientv3.Client) {
	clock := clockwork.NewFakeClock()
	e := memetcd.New(clock)
	t.Cleanup(e.Close)
	return e, clock, func(t *testing.T) *clientv3.Client {
		cli := e.Client()
		t.Cleanup(func() { cli.Close() })
		return cli
	}
}

// TestContract runs the store contract on the memory etcd.
func TestContract(t *testing.T) {
	_, clock, newClient := newEtcd(t)
	storecontract.Run(t, storecontract.Edge{NewClient: newClient, Advance: clock.Advance})
}

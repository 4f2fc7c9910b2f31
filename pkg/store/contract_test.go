package store_test

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store/storecontract"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestContract runs the store contract on a real (embedded) etcd: what
// the memory etcd of package memetcd passes, etcd must pass too. Its
// leases expire in real time, so the lease cases wait a few seconds.
func TestContract(t *testing.T) {
	c := etcdtest.Start(t, 1)
	storecontract.Run(t, storecontract.Edge{
		NewClient: func(t *testing.T) *clientv3.Client { return etcdtest.NewClient(t, c.Endpoints()...) },
	})
}

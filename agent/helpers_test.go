package agent

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// oneMemberStore starts a one-member etcd for the test and returns a store
// on it, under the default prefix.
func oneMemberStore(t *testing.T) *store.Store {
	t.Helper()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

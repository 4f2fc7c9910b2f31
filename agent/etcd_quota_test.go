package agent

import (
	"context"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/store"
)

// TestStartQuota: before the EtcdCluster is read the member starts with
// the quota its data dir last ran with; once the etcd-quota controller
// read spec.policy.quotaBackendBytes, with that (0 too: etcd's default).
func TestStartQuota(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	peer, client := etcdtest.URLs(t)
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}, nil, sdnotify.New(), logging.Test(t))
	a.use(st.Client(), st)
	a.etcd.quota.Store(32 << 20) // the marker's
	if q := a.member.startQuota(); q != 32<<20 {
		t.Fatalf("before the spec is read: %d, want the marker's", q)
	}
	reconcile := func() {
		t.Helper()
		c := a.quotaWatch().(*controller.Func)
		if err := c.Do(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reconcile() // no EtcdCluster yet: nothing known
	if q := a.member.startQuota(); q != 32<<20 {
		t.Fatalf("without an EtcdCluster: %d, want the marker's", q)
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Policy.QuotaBackendBytes = 64 << 20
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if q := a.member.startQuota(); q != 64<<20 {
		t.Fatalf("after the spec: %d, want 64 MiB", q)
	}
	ec.Spec.Policy.QuotaBackendBytes = 0
	if err := st.Put(t.Context(), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if q := a.member.startQuota(); q != 0 {
		t.Fatalf("spec back to 0: %d, want 0 (etcd's default)", q)
	}
}

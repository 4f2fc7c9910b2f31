package kubepki_test

import (
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdIdentity: on a real etcd with authentication on, the cluster's
// etcd identity — the certificate Ensure issued, signed by nico's CA —
// reads and writes under /clusters/demo/registry/ and nothing else: not
// a sibling cluster's prefix, not the prefix without its slash, not
// nico's keys, not compact_rev_key. A
// permission granted by hand is revoked by the next Ensure. Delete takes
// the identity, the keys and the secrets away, and nothing of a sibling.
func TestEtcdIdentity(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	if err := rbac.EnableAuth(ctx, e.root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Put(ctx, store.DefaultPrefix+store.NodeKey("cp-1"), "{}"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Put(ctx, "/clusters/demox/registry/pods/a", "sibling"); err != nil {
		t.Fatal(err)
	}
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://10.0.0.10:6443", NicoCA: etcdtest.PKI(t), Machines: []string{"cp-1"}}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := kubepki.EnsureEtcdIdentity(ctx, e.root.Auth, "demo"); err != nil {
			t.Fatal(err)
		}
	}
	if again, err := kubepki.EnsureEtcdIdentity(ctx, e.root.Auth, "demo"); err != nil || len(again) != 0 {
		t.Fatalf("third pass: %v, %v", again, err)
	}
	cert := e.secret(t, kubepki.EtcdClientSecret("demo"))
	api := e.clientWith(t, cert.Spec.Data[kubepki.KeyCert], cert.Spec.Data[kubepki.KeyKey])

	in := kubepki.EtcdKeyPrefix("demo") + "pods/default/web"
	if _, err := api.Put(ctx, in, "pod"); err != nil {
		t.Fatalf("write inside its prefix: %v", err)
	}
	if r, err := api.Get(ctx, kubepki.EtcdKeyPrefix("demo"), clientv3.WithPrefix()); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("list its prefix: %v, %v", r, err)
	}
	lease, err := api.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Put(ctx, kubepki.EtcdKeyPrefix("demo")+"leases/x", "", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("a key on a lease inside its prefix: %v", err)
	}
	if _, err := api.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("keep its lease alive: %v", err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s: %v, want permission denied", what, err)
		}
	}
	_, err = api.Put(ctx, kubepki.CompactRevKey, "1")
	denied("write compact_rev_key", err)
	_, err = api.Get(ctx, kubepki.CompactRevKey)
	denied("read compact_rev_key", err)
	_, err = api.Put(ctx, "/clusters/demox/registry/pods/b", "x")
	denied("write a sibling cluster's prefix", err)
	_, err = api.Get(ctx, "/clusters/demox/registry/pods/a")
	denied("read a sibling cluster's key", err)
	_, err = api.Put(ctx, kubepki.EtcdPrefix("demo"), "x")
	denied("write the prefix without its slash", err)
	_, err = api.Put(ctx, kubepki.EtcdPrefix("demo")+"x/a", "x")
	denied("write /clusters/demo/registryx/", err)
	_, err = api.Put(ctx, "/clusters/demo/other", "x")
	denied("write elsewhere in the cluster's dir", err)
	_, err = api.Get(ctx, store.DefaultPrefix+store.NodeKey("cp-1"))
	denied("read nico's node", err)
	_, err = api.Get(ctx, store.DefaultPrefix, clientv3.WithPrefix())
	denied("list nico's keyspace", err)
	_, err = api.Get(ctx, store.DefaultPrefix+store.NamedSecretKey(kubepki.CASecret("demo")))
	denied("read its own CA's sealed secret", err)
	_, err = api.Get(ctx, "", clientv3.WithFromKey())
	denied("read the whole keyspace", err)
	_, err = api.UserList(ctx)
	denied("list users", err)

	// A permission granted by hand goes with the next Ensure.
	if _, err := e.root.RoleGrantPermission(ctx, kubepki.EtcdUser("demo"), store.DefaultPrefix, clientv3.GetPrefixRangeEnd(store.DefaultPrefix), clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Get(ctx, store.DefaultPrefix+store.NodeKey("cp-1")); err != nil {
		t.Fatalf("the hand-granted permission did not take: %v", err)
	}
	if ch, err := kubepki.EnsureEtcdIdentity(ctx, e.root.Auth, "demo"); err != nil || len(ch) != 1 || ch[0].Op != rbac.RevokePermission {
		t.Fatalf("ensure after a hand grant: %v, %v", ch, err)
	}
	_, err = api.Get(ctx, store.DefaultPrefix+store.NodeKey("cp-1"))
	denied("read nico's node after the revocation", err)

	// Deletion: the identity reaches nothing, the data and secrets are gone.
	for range 2 {
		if err := kubepki.Delete(ctx, e.root, e.sec, "demo", []string{"cp-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.Get(ctx, in); err == nil {
		t.Fatal("the deleted cluster's identity still reads")
	}
	if r, err := e.raw.Get(ctx, kubepki.ClusterKeyPrefix("demo"), clientv3.WithPrefix()); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("cluster keys after delete: %v, %v", r, err)
	}
	if r, err := e.raw.Get(ctx, "/clusters/demox/registry/pods/a"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the sibling's key after delete: %v, %v", r, err)
	}
	if r, err := e.raw.Get(ctx, store.DefaultPrefix+store.NamedSecretsDir, clientv3.WithPrefix()); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("%d secrets left after delete, %v", len(r.Kvs), err)
	}
	if _, err := e.root.RoleGet(ctx, kubepki.EtcdUser("demo")); !errors.Is(err, rpctypes.ErrRoleNotFound) {
		t.Fatalf("role after delete: %v", err)
	}
}

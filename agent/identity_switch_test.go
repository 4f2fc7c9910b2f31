package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestJoinUnderRootThenSwitch: a control-plane machine that joins talks to
// etcd under its root pair, making no auth change on the way (its node's
// user does not exist and it still writes); etcdIdentity.finish then makes the
// node's user and role and switches the store client to the node
// certificate, which a deleted node user then locks out, while the root
// client is kept, open, for shutdown to close.
func TestJoinUnderRootThenSwitch(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, cl.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := store.DefaultPrefix
	if err := rbac.EnableAuth(ctx, root.Auth, p, []rbac.NodeIdentity{{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}}}, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	d := pki.Dir(t.TempDir())
	etcdtest.ProvisionPKI(t, d, "cp-2", true)
	a := New(Config{
		Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, Endpoints: cl.Endpoints(), Prefix: p,
		DialTimeout: 5 * time.Second, PKI: PKIConfig{Dir: d},
	}, nil, quietNotifier{}, logging.Test(t))
	if err := allPKI(ctx, a); err != nil {
		t.Fatal(err)
	}
	id := a.identity()
	if err := id.useRoot(); err != nil {
		t.Fatal(err)
	}
	if err := a.connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := id.ensure(ctx); err != nil || !a.root.left {
		t.Fatalf("ensure: %v, left %v; want nil, the identity left for after the join", err, a.root.left)
	}
	if cn := clientCN(t, a.client()); cn != pki.RootIdentity {
		t.Fatalf("joining client presents %q, want %q", cn, pki.RootIdentity)
	}
	if _, err := root.UserGet(ctx, pki.NodeIdentity("cp-2")); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("the node's etcd user before the join: %v, want not found (no auth change on the way)", err)
	}
	if err := a.store().Put(ctx, store.NodeKey("cp-2"), api.NewNode("cp-2")); err != nil {
		t.Fatalf("joining machine writes its node under root: %v", err)
	}
	lease, err := a.client().Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := a.client().KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}

	// As Run does: one auth change may time out on a loaded machine
	// ("etcdserver: request timed out" under -race beside a build).
	warn := func(err error, next time.Duration) { t.Logf("finish: %v; again in %v", err, next) }
	if err := untilDone(ctx, identityRetry(), warn, id.finish); err != nil {
		t.Fatal(err)
	}
	if a.root.left || a.root.inUse.Load() || a.root.retired == nil {
		t.Fatalf("after finish: left %v, asRoot %v, retired %v", a.root.left, a.root.inUse.Load(), a.root.retired)
	}
	if cn := clientCN(t, a.client()); cn != pki.NodeIdentity("cp-2") {
		t.Fatalf("client after the switch presents %q, want the node's %q", cn, pki.NodeIdentity("cp-2"))
	}
	if cn := clientCN(t, a.root.retired); cn != pki.RootIdentity {
		t.Fatalf("the retired client presents %q, want root", cn)
	}
	if u, err := root.UserGet(ctx, pki.NodeIdentity("cp-2")); err != nil || len(u.Roles) < 2 {
		t.Fatalf("the node's etcd user after the join: %+v, %v; want it with its roles", u, err)
	}
	if _, err := a.client().Get(ctx, store.NodeKey("cp-2")); err != nil {
		t.Fatalf("the node reads under its identity: %v", err)
	}
	// The lease granted under root is still kept alive over the retired
	// client.
	select {
	case r, ok := <-keep:
		if !ok || r == nil {
			t.Fatal("the first lease's keepalive ended with the switch")
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	// The node's own identity, not root, is what the client now runs as.
	if _, err := root.UserDelete(ctx, pki.NodeIdentity("cp-2")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client().Get(ctx, store.NodeKey("cp-2")); !errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("read with the node's user deleted: %v, want refused", err)
	}
	if _, err := a.root.retired.Get(ctx, p+store.NodeKey("cp-2"), clientv3.WithCountOnly()); err != nil {
		t.Fatalf("the retired root client: %v", err)
	}
	a.shutdown(nil)
	if _, err := a.root.retired.Get(ctx, "x"); err == nil {
		t.Fatal("shutdown left the retired client open")
	}
}

// clientCN is the common name of the certificate cli presents.
func clientCN(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	c, err := etcdclient.TLSOf(cli).GetClientCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

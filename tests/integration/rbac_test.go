package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestRBAC checks the identities of docs/security.md on a real etcd with
// mutual TLS and authentication on: a node writes its own keys and nothing
// else, reads no secret but its own, cannot change membership; the
// coordinator can; a client without a certificate of the cluster CA can do
// nothing.
func TestRBAC(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	eps := c.Endpoints()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := store.DefaultPrefix

	root := etcdtest.NewClient(t, eps...) // CN root
	if _, err := root.Put(ctx, p+store.TokenKey("abcdef"), "sealed"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, p+"secrets/nodes/a/kubeconfig", "sealed-a"); err != nil {
		t.Fatal(err)
	}
	nodes := []rbac.NodeIdentity{{Name: "a", Roles: []api.Role{api.RoleWorker}}, {Name: "b", Roles: []api.Role{api.RoleWorker}}}
	if err := rbac.EnableAuth(ctx, root.Auth, p, nodes, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := root.AuthStatus(ctx); err != nil || !st.Enabled {
		t.Fatalf("auth status %+v %v", st, err)
	}

	as := func(cn string) *clientv3.Client { return clientAs(t, eps, etcdtest.ClientTLS(t, cn)) }
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s: err = %v, want permission denied", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	t.Run("node a", func(t *testing.T) {
		a := as(pki.NodeIdentity("a"))
		_, err := a.Put(ctx, p+store.NodeKey("a"), "{}")
		allowed("write nodes/a", err)
		lease, err := a.Grant(ctx, 30)
		allowed("grant a lease", err)
		if err == nil {
			_, err = a.Put(ctx, p+store.HeartbeatKey("a"), "now", clientv3.WithLease(lease.ID))
			allowed("write heartbeats/a on its lease", err)
			_, err = a.KeepAliveOnce(ctx, lease.ID)
			allowed("renew its lease", err)
		}
		_, err = a.Get(ctx, p+store.NodesDir, clientv3.WithPrefix())
		allowed("list nodes/", err)
		_, err = a.Get(ctx, p+"secrets/nodes/a/kubeconfig")
		allowed("read its own secret", err)
		_, err = a.Status(ctx, eps[0])
		allowed("member status", err)

		_, err = a.Put(ctx, p+store.NodeKey("b"), "{}")
		denied("write nodes/b", err)
		_, err = a.Put(ctx, p+store.HeartbeatKey("b"), "now")
		denied("write heartbeats/b", err)
		_, err = a.Delete(ctx, p+store.NodesDir, clientv3.WithPrefix())
		denied("delete nodes/", err)
		_, err = a.Put(ctx, p+store.ActiveOpKey, "op")
		denied("write active-op", err)
		_, err = a.Get(ctx, p+store.TokenKey("abcdef"))
		denied("read a token", err)
		_, err = a.Get(ctx, p+"secrets/nodes/b/kubeconfig")
		denied("read node b's secret", err)
		_, err = a.Get(ctx, p, clientv3.WithPrefix())
		denied("read the whole prefix (secrets included)", err)
		_, err = a.MemberAdd(ctx, []string{"https://127.0.0.1:1"})
		denied("member add", err)
		_, err = a.MemberList(ctx)
		allowed("member list", err)
		_, err = a.UserAdd(ctx, "mallory", "pw")
		denied("user add", err)
	})

	t.Run("node b's lease is b's", func(t *testing.T) {
		b, a := as(pki.NodeIdentity("b")), as(pki.NodeIdentity("a"))
		lease, err := b.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, p+store.HeartbeatKey("b"), "now", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		_, err = a.Revoke(ctx, lease.ID)
		denied("node a revokes node b's heartbeat lease", err)
		_, err = b.Revoke(ctx, lease.ID)
		allowed("node b revokes its own lease", err)
	})

	t.Run("coordinator", func(t *testing.T) {
		co := as(pki.CoordinatorIdentity)
		_, err := co.Put(ctx, p+store.NodeKey("b"), "{}")
		allowed("write nodes/b", err)
		_, err = co.Get(ctx, p+store.TokenKey("abcdef"))
		allowed("read a token", err)
		resp, err := co.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"})
		allowed("member add", err)
		if err == nil {
			_, err = co.MemberRemove(ctx, resp.Member.ID)
			allowed("member remove", err)
		}
	})

	t.Run("no certificate, or another CA's", func(t *testing.T) {
		pair := etcdtest.ForeignCertificate(t, pki.RootIdentity)
		trust := etcdtest.PKI(t).Pool()
		for name, cfg := range map[string]*tls.Config{
			"no certificate":  {MinVersion: tls.VersionTLS12, RootCAs: trust},
			"another CA root": {MinVersion: tls.VersionTLS12, RootCAs: trust, Certificates: []tls.Certificate{pair}},
		} {
			// The server refuses the handshake itself...
			u, err := url.Parse(eps[0])
			if err != nil {
				t.Fatal(err)
			}
			if conn, err := tls.Dial("tcp", u.Host, cfg); err == nil {
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
				if err == nil || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("%s: TLS connection not refused for its certificate: %v", name, err)
				}
			}
			// ...so that an etcd client gets nothing.
			cli := clientAs(t, eps, cfg)
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := cli.Get(cctx, p, clientv3.WithPrefix())
			cancel()
			if err == nil {
				t.Errorf("%s: read %d keys", name, len(resp.Kvs))
			}
			cctx, cancel = context.WithTimeout(ctx, 2*time.Second)
			_, err = cli.Put(cctx, p+store.NodeKey("a"), "{}")
			cancel()
			if err == nil {
				t.Errorf("%s: wrote nodes/a", name)
			}
		}
	})
}

// clientAs is a client presenting cfg's certificate, closed with the test.
func clientAs(t *testing.T, eps []string, cfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestRemovedNodeLosesItsEtcdAccess: once a worker's removal is done and
// its agent has left (node marked removed, heartbeat dropped), the leader
// deletes its etcd user and role; the worker's certificate, still valid,
// can then neither read nor write its own keys.
func TestRemovedNodeLosesItsEtcdAccess(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	cfg := f.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	if cfg.PKI.Dir == "" {
		t.Skip("plaintext etcd (NICO_ETCDTEST_TLS=0): no identities to revoke")
	}
	n := f.Start(cfg)
	testwait.For(t, 30*time.Second, "worker ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })

	d := cfg.PKI.Dir
	tlsCfg, err := pki.ClientTLS(d.CACert(), d.Cert(pki.NodeLeaf), d.Key(pki.NodeLeaf))
	if err != nil {
		t.Fatal(err)
	}
	w1 := clientAs(t, f.Endpoints(), tlsCfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := store.DefaultPrefix
	if _, err := w1.Get(ctx, p+store.NodeKey("w-1")); err != nil {
		t.Fatalf("before removal, w-1 reads its node: %v", err)
	}

	f.requestRemoval("w-1", false)
	n.WaitRemoved(t, 30*time.Second, "removed worker did not stop")
	// The agent could still record its removal with its identity.
	waitObj[api.Node](f, 10*time.Second, store.NodeKey("w-1"), "worker marked removed", func(n *api.Node) bool { return n.Status.Phase == api.NodeRemoved })
	r := waitObj[api.RemoveRequest](f, 30*time.Second, store.RemovalKey("w-1"), "identity revoked", func(r *api.RemoveRequest) bool {
		return r.Status.Phase == api.RemoveDone && !r.Status.IdentityRevokedAt.IsZero()
	})
	t.Logf("identity revoked at %s", r.Status.IdentityRevokedAt)

	root := f.Client()
	if _, err := root.UserGet(ctx, pki.NodeIdentity("w-1")); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("etcd user of removed w-1: %v, want not found", err)
	}
	if _, err := root.RoleGet(ctx, rbac.NodeRole("w-1")); !errors.Is(err, rpctypes.ErrRoleNotFound) {
		t.Fatalf("etcd role of removed w-1: %v, want not found", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, rpctypes.ErrUserNotFound) {
			t.Errorf("%s with the removed node's certificate: err = %v, want permission denied or user not found", what, err)
		}
	}
	_, err = w1.Get(ctx, p+store.NodeKey("w-1"))
	refused("read nodes/w-1", err)
	_, err = w1.Put(ctx, p+store.NodeKey("w-1"), "{}")
	refused("write nodes/w-1", err)
	_, err = w1.Put(ctx, p+store.HeartbeatKey("w-1"), "now")
	refused("write heartbeats/w-1", err)
	_, err = w1.Get(ctx, p+store.NodesDir, clientv3.WithPrefix())
	refused("list nodes/", err)
	// cp-1 keeps its identity.
	if _, err := root.UserGet(ctx, pki.NodeIdentity("cp-1")); err != nil {
		t.Fatalf("etcd user of cp-1: %v", err)
	}

	// A worker that is down when it is removed loses its identity as the
	// removal finishes (no agent is there to record it).
	cfg2 := f.AgentConfig("w-2", false)
	cfg2.Roles = []api.Role{api.RoleWorker}
	n2 := f.Start(cfg2)
	testwait.For(t, 30*time.Second, "w-2 ready", func() (bool, string) { return n2.Agent.Healthy(), "not healthy" })
	if err := n2.Stop(); err != nil {
		t.Fatal(err)
	}
	f.requestRemoval("w-2", false)
	r = waitObj[api.RemoveRequest](f, 30*time.Second, store.RemovalKey("w-2"), "w-2 removed", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
	if r.Status.IdentityRevokedAt.IsZero() {
		t.Fatalf("w-2 removed without its identity revoked: %+v", r.Status)
	}
	if _, err := root.UserGet(ctx, pki.NodeIdentity("w-2")); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("etcd user of removed w-2: %v, want not found", err)
	}
}

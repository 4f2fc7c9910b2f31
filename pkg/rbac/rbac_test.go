package rbac_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestApplyOnEtcd runs the applier against a real etcd with mutual TLS:
// what it grants reads back as planned (a second pass changes nothing),
// auth turns on, and EnsureNode then adds and takes away a node's rights.
func TestApplyOnEtcd(t *testing.T) {
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := store.DefaultPrefix
	nodes := []rbac.NodeIdentity{{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}}, {Name: "w", Roles: []api.Role{api.RoleWorker}}}

	changes, err := rbac.Ensure(ctx, root.Auth, p, nodes)
	if err != nil || len(changes) == 0 {
		t.Fatalf("first pass: %d changes, %v", len(changes), err)
	}
	if again, err := rbac.Ensure(ctx, root.Auth, p, nodes); err != nil || len(again) != 0 {
		t.Fatalf("second pass: %v, %v", again, err)
	}
	if err := rbac.EnableAuth(ctx, root.Auth, p, nodes, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	if err := rbac.EnableAuth(ctx, root.Auth, p, nodes, logging.Test(t)); err != nil {
		t.Fatalf("EnableAuth again: %v", err)
	}

	hv := client(t, c.Endpoints(), pki.NodeIdentity("hv"))
	if _, err := hv.Put(ctx, p+"machines/m-0", "{}"); err == nil {
		t.Fatal("an unknown user wrote")
	}
	if err := rbac.EnsureNode(ctx, root.Auth, p, "hv", []api.Role{api.RoleHypervisor}); err != nil {
		t.Fatal(err)
	}
	if _, err := hv.Put(ctx, p+"machines/m-0", "{}"); err != nil {
		t.Fatalf("hypervisor writes machines/: %v", err)
	}
	if err := rbac.EnsureNode(ctx, root.Auth, p, "hv", []api.Role{api.RoleWorker}); err != nil {
		t.Fatal(err)
	}
	if _, err := hv.Put(ctx, p+"machines/m-0", "{}"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("no longer a hypervisor, writes machines/: %v", err)
	}
	if _, err := hv.Put(ctx, p+store.NodeKey("hv"), "{}"); err != nil {
		t.Fatalf("writes its node: %v", err)
	}

	// A removed node's certificate reaches nothing any more.
	for range 2 {
		if err := rbac.RemoveNode(ctx, root.Auth, "hv"); err != nil {
			t.Fatalf("remove node: %v", err)
		}
	}
	if _, err := hv.Get(ctx, p+store.NodeKey("hv")); err == nil {
		t.Fatal("a removed node still reads")
	}

	// A control-plane node's user is root: it may move etcd's leader.
	cp := client(t, c.Endpoints(), pki.NodeIdentity("cp-1"))
	if _, err := cp.MemberList(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.UserList(ctx); err != nil {
		t.Fatalf("control-plane node is not root: %v", err)
	}
	w := client(t, c.Endpoints(), pki.NodeIdentity("w"))
	if _, err := w.UserList(ctx); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("worker lists users: %v", err)
	}
	// Only root may manage users: a node cannot make itself one.
	if err := rbac.EnsureNode(ctx, w.Auth, p, "w", []api.Role{api.RoleControlPlane}); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("worker grants itself root: %v", err)
	}
}

func client(t *testing.T, eps []string, cn string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: etcdtest.ClientTLS(t, cn), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

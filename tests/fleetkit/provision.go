package fleetkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/rbac"
)

// Provision fills an agent's empty pki.dir from the test binary's CA as a
// join would (etcdtest.ProvisionPKI): a control-plane agent gets ca.key
// and issues its own certificates; any other gets its node certificate
// and, through endpoints (the running members, as root), the etcd user and
// role the join endpoint would have made for it (rbac.EnsureNode): with
// auth on, a certificate etcd has no user for can do nothing. A config
// without a pki.dir (plaintext etcd) needs nothing.
func Provision(tb testing.TB, cfg agent.Config, endpoints []string) {
	tb.Helper()
	if cfg.PKI.Dir == "" {
		return
	}
	cp := slices.Contains(cfg.Roles, api.RoleControlPlane)
	etcdtest.ProvisionPKI(tb, cfg.PKI.Dir, cfg.Name, cp)
	if cp {
		return
	}
	cli := etcdtest.NewClient(tb, endpoints...) // root, of the fleet's CA
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rbac.EnsureNode(ctx, cli.Auth, cfg.Prefix, cfg.Name, cfg.Roles); err != nil {
		tb.Fatalf("etcd identity of %s: %v", cfg.Name, err)
	}
}

package rbac

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EnsureSelf is the agent's hook on a control-plane machine, which holds
// the root certificate (dir's root pair): once connected, before it
// registers, the agent makes its own etcd user and role as root, and the
// bootstrap machine (enable) turns authentication on. Idempotent: every
// start of every control-plane agent may call it. A joining machine joins
// under the root identity and calls EnsureSelf once it is a voter (or a
// standby): made while the join's writes are in flight, each auth change
// would fail the writes checked before it (ErrAuthOldRevision) and have
// them proposed again.
//
//	agent.Run: ensurePKI → localMember.prepare → connect → EnsureSelf → register
//	agent.Run (joining): connect as root → register → join → voter → EnsureSelf → node identity
func EnsureSelf(ctx context.Context, dir pki.Dir, endpoints []string, prefix, name string, roles []api.Role, enable bool, log *slog.Logger) error {
	cli, err := rootClient(dir, endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	nodes := []NodeIdentity{{Name: name, Roles: roles}}
	if enable {
		return EnableAuth(ctx, cli.Auth, prefix, nodes, log)
	}
	changes, err := Ensure(ctx, cli.Auth, prefix, nodes)
	if err == nil && len(changes) > 0 {
		log.Info("etcd user and role of this node made", "user", NodeRole(name), "changes", len(changes))
	}
	return err
}

// rootClient connects to endpoints as root, with dir's root pair.
func rootClient(dir pki.Dir, endpoints []string) (*clientv3.Client, error) {
	tlsCfg, err := pki.ClientTLS(dir.CACert(), dir.Cert(pki.RootLeaf), dir.Key(pki.RootLeaf))
	if err != nil {
		return nil, fmt.Errorf("rbac: root identity: %w", err)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg})
	if err != nil {
		return nil, fmt.Errorf("rbac: connect as root: %w", err)
	}
	return cli, nil
}

// IdentityEnsurer returns the join endpoint's hook
// (join.ServerConfig.EnsureIdentityRoles): make the etcd user and role of
// an admitted node, with the roles its token allowed, through auth, a root
// client.
func IdentityEnsurer(auth clientv3.Auth, prefix string) func(ctx context.Context, name string, roles []api.Role) error {
	return func(ctx context.Context, name string, roles []api.Role) error {
		return EnsureNode(ctx, auth, prefix, name, roles)
	}
}

package agent

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
)

// ensureIdentity, on a control-plane machine (it holds the root
// certificate), makes this node's etcd user and role before the node
// writes anything, and on the bootstrap machine turns etcd's
// authentication on (package rbac). Other machines got their user from the
// join endpoint that admitted them.
func (a *Agent) ensureIdentity(ctx context.Context) error {
	d := a.cfg.PKI.Dir
	if d == "" || !a.controlPlane() || !exists(d.Cert(pki.RootLeaf)) {
		return nil
	}
	if err := rbac.EnsureSelf(ctx, d, a.cli.Endpoints(), a.cfg.Prefix, a.cfg.Name, a.cfg.Roles, a.cfg.Bootstrap, a.log); err != nil {
		return fmt.Errorf("agent: etcd identity: %w", err)
	}
	return nil
}

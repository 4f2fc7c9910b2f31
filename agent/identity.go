package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
)

// ensureIdentity, on a control-plane machine (it holds the root
// certificate), makes this node's etcd user and role before the node
// writes anything, and on the bootstrap machine turns etcd's
// authentication on (package rbac). Other machines got their user from the
// join endpoint that admitted them. A machine that joins (joining) makes
// only its user, with role root, now: the rest of its identity is made by
// finishIdentity once its member is a voter, off the way to it
// (rbac.EnsureSelfUser says why).
func (a *Agent) ensureIdentity(ctx context.Context, joining bool) error {
	if !a.holdsRoot() {
		return nil
	}
	if joining && !a.cfg.Bootstrap {
		if err := rbac.EnsureSelfUser(ctx, a.cfg.PKI.Dir, a.cli.Endpoints(), a.cfg.Name); err != nil {
			return fmt.Errorf("agent: etcd user: %w", err)
		}
		a.identityLeft = true
		a.log.Info("etcd user of this node made; its role follows once the member is a voter", "user", rbac.NodeRole(a.cfg.Name))
		return nil
	}
	return a.ensureFullIdentity(ctx)
}

// finishIdentity makes the part of this node's etcd identity that
// ensureIdentity left for after the join; a no-op when it left none.
func (a *Agent) finishIdentity(ctx context.Context) error {
	if !a.identityLeft {
		return nil
	}
	if err := a.ensureFullIdentity(ctx); err != nil {
		return err
	}
	a.identityLeft = false
	return nil
}

// ensureFullIdentity makes this node's etcd user and role (rbac.EnsureSelf).
func (a *Agent) ensureFullIdentity(ctx context.Context) error {
	if err := rbac.EnsureSelf(ctx, a.cfg.PKI.Dir, a.cli.Endpoints(), a.cfg.Prefix, a.cfg.Name, a.cfg.Roles, a.cfg.Bootstrap, a.log); err != nil {
		return fmt.Errorf("agent: etcd identity: %w", err)
	}
	return nil
}

// holdsRoot tells whether this is a control-plane machine with the root
// certificate, which makes its own etcd identity.
func (a *Agent) holdsRoot() bool {
	d := a.cfg.PKI.Dir
	return d != "" && a.controlPlane() && exists(d.Cert(pki.RootLeaf))
}

// identityRetry paces finishIdentityUntilDone's attempts.
func identityRetry() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 5 * time.Second}
}

// untilDone calls try until it succeeds or ctx ends, pausing by b between
// attempts and logging each failure. finishIdentity's eleven auth changes
// run right after the join, while the cluster often changes leader or
// membership; one failed change ("leader changed", a timeout) must not
// stop the agent, whose member the cluster now counts for quorum.
func untilDone(ctx context.Context, b backoff.BackOff, log func(err error, next time.Duration), try func(context.Context) error) error {
	b.Reset()
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next := b.NextBackOff()
		log(err, next)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

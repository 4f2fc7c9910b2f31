package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootIdentity is the root pair's client identity a control-plane machine
// that joins talks to etcd under (joinUnderRoot), until finishIdentity has
// made its node's own.
type rootIdentity struct {
	tls *tls.Config
	// inUse: the agent's store clients are made under tls.
	inUse atomic.Bool
	// left: ensureIdentity left the node's etcd identity to
	// finishIdentity (the bring-up's goroutines only, one after another).
	left bool
	// retired is the store client made under tls, once switchIdentity
	// replaced it; shutdown closes it (the heartbeat's first lease is kept
	// alive over it).
	retired *clientv3.Client
}

// ensureIdentity, on a control-plane machine (it holds the root
// certificate), makes this node's etcd user and role before the node
// writes anything, and on the bootstrap machine turns etcd's
// authentication on (package rbac). Other machines got their user from the
// join endpoint that admitted them. A machine that joins under its root
// identity (joinUnderRoot) makes none of it now: finishIdentity makes it
// once its member is a voter, off the way to it.
func (a *Agent) ensureIdentity(ctx context.Context) error {
	if !a.holdsRoot() {
		return nil
	}
	if a.root.inUse.Load() {
		a.root.left = true
		return nil
	}
	return a.ensureFullIdentity(ctx)
}

// joinUnderRoot has a control-plane machine that joins talk to etcd under
// the root pair it holds, until finishIdentity has made its node's etcd
// user and role and switchIdentity its clients. Its node user would have
// role root all the same (package rbac); what this saves is the user's
// two auth changes, each a raft round, on the way to MemberAdd, which
// could not run beside the join's writes: an auth change fails every
// request checked before it applies (ErrAuthOldRevision).
func (a *Agent) joinUnderRoot() error {
	d := a.cfg.PKI.Dir
	t, err := pki.ClientTLS(d.CACert(), d.Cert(pki.RootLeaf), d.Key(pki.RootLeaf))
	if err != nil {
		return fmt.Errorf("agent: root identity from %s: %w", d, err)
	}
	a.root.tls = t
	a.root.inUse.Store(true)
	a.log.Info("joining under the root identity; the node's etcd user and role follow once the member is a voter", "user", rbac.NodeRole(a.cfg.Name))
	return nil
}

// finishIdentity makes the part of this node's etcd identity that
// ensureIdentity left for after the join, then switches to it; a no-op
// when it left none.
func (a *Agent) finishIdentity(ctx context.Context) error {
	if !a.root.left {
		return nil
	}
	if err := a.ensureFullIdentity(ctx); err != nil {
		return err
	}
	if a.root.inUse.Load() {
		if err := a.switchIdentity(); err != nil {
			return err
		}
	}
	a.root.left = false
	return nil
}

// switchIdentity replaces the store client a joining machine connected
// under the root identity with one under its node's, now made. The old
// client stays open until shutdown: the heartbeat's first lease is kept
// alive over it (closing it would lose the lease, and with it the
// heartbeat the leader revokes a node's identity on), and the watches the
// heartbeat controller opened on it go on. Everything else reads the
// client anew (client, store), and the gossip key follower, which holds
// its store, is started again by Run.
func (a *Agent) switchIdentity() error {
	old := a.conn.Load()
	a.root.inUse.Store(false)
	cli, err := a.etcdClient(old.cli.Endpoints(), 5*time.Second)
	if err != nil {
		a.root.inUse.Store(true)
		return fmt.Errorf("agent: connect as %s: %w", rbac.NodeRole(a.cfg.Name), err)
	}
	st, err := store.New(cli, a.cfg.Prefix)
	if err != nil {
		cli.Close()
		a.root.inUse.Store(true)
		return err
	}
	a.use(cli, st)
	a.root.retired = old.cli
	if a.cfg.OnConnect != nil {
		a.cfg.OnConnect(st)
	}
	a.log.Info("etcd identity of this node made; its clients use it now", "user", rbac.NodeRole(a.cfg.Name))
	return nil
}

// ensureFullIdentity makes this node's etcd user and role (rbac.EnsureSelf).
func (a *Agent) ensureFullIdentity(ctx context.Context) error {
	if err := rbac.EnsureSelf(ctx, a.cfg.PKI.Dir, a.client().Endpoints(), a.cfg.Prefix, a.cfg.Name, a.cfg.Roles, a.cfg.Bootstrap, a.log); err != nil {
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

// identityRetry paces the attempts of the identity's changes (untilDone).
func identityRetry() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 5 * time.Second}
}

// identityWarning logs a failed attempt at the node's etcd identity that
// untilDone tries again.
func (a *Agent) identityWarning(err error, next time.Duration) {
	a.log.Warn("etcd identity not made; trying again", "err", err, "in", next)
}

// transientOnly has untilDone try step again only after an etcd error that
// passes by itself (etcdadmin.Transient: a timeout, a leader change, a lost
// connection); any other error (a certificate missing, a permission
// refused) ends it.
func transientOnly(step func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := step(ctx)
		if err != nil && !etcdadmin.Transient(err) {
			return backoff.Permanent(err)
		}
		return err
	}
}

// untilDone calls try until it succeeds, returns a backoff.Permanent
// error (whose cause it returns), or ctx ends, pausing by b between
// attempts and logging each failure. The identity's auth changes run while
// the cluster often changes leader or membership (at bring-up, and right
// after a join); one failed change ("leader changed", a timeout) must not
// stop the agent, whose member the cluster may count for quorum.
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
		if perm, ok := errors.AsType[*backoff.PermanentError](err); ok {
			return perm.Err
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

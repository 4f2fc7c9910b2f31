package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootIdentity is the root pair's client identity a control-plane machine
// that joins talks to etcd under (etcdIdentity.useRoot), until
// etcdIdentity.finish has made its node's own.
type rootIdentity struct {
	tls *tls.Config
	// inUse: the agent's store clients are made under tls.
	inUse atomic.Bool
	// left: ensure left the node's etcd identity to finish (the
	// bring-up's goroutines only, one after another).
	left bool
	// retired is the store client made under tls, once switchToNode
	// replaced it; shutdown closes it (the heartbeat's first lease is kept
	// alive over it).
	retired *clientv3.Client
}

// etcdIdentity makes the node's etcd identity and moves the agent's store
// clients onto it: the bring-up's etcd-identity and voter phases, and a
// standby's wait. It keeps its state in the agent's rootIdentity and takes
// what it uses, not the agent.
type etcdIdentity struct {
	root         *rootIdentity
	dir          pki.Dir
	name, prefix string
	roles        []api.Role
	// bootstrap: this machine turns etcd's authentication on.
	bootstrap, controlPlane bool
	// endpoints are the store client's.
	endpoints func() []string
	// reconnect replaces the store client with one made under the client
	// identity now in use, and returns the client it replaced.
	reconnect func() (*clientv3.Client, error)
	log       *slog.Logger
}

// identity is the agent's etcdIdentity.
func (a *Agent) identity() *etcdIdentity {
	return &etcdIdentity{root: &a.root, dir: a.cfg.PKI.Dir, name: a.cfg.Name, prefix: a.cfg.Prefix, roles: a.cfg.Roles,
		bootstrap: a.cfg.Bootstrap, controlPlane: a.controlPlane(),
		endpoints: func() []string { return a.client().Endpoints() }, reconnect: a.reconnect, log: a.log}
}

// ensure, on a control-plane machine (it holds the root certificate),
// makes this node's etcd user and role before the node writes anything,
// and on the bootstrap machine turns etcd's authentication on (package
// rbac). Other machines got their user from the join endpoint that
// admitted them. A machine that joins under its root identity (useRoot)
// makes none of it now: finish makes it once its member is a voter, off
// the way to it.
func (id *etcdIdentity) ensure(ctx context.Context) error {
	if !id.holdsRoot() {
		return nil
	}
	if id.root.inUse.Load() {
		id.root.left = true
		return nil
	}
	return id.ensureFull(ctx)
}

// useRoot has a control-plane machine that joins talk to etcd under the
// root pair it holds, until finish has made its node's etcd user and role
// and switched its clients. Its node user would have role root all the
// same (package rbac); what this saves is the user's two auth changes,
// each a raft round, on the way to MemberAdd, which could not run beside
// the join's writes: an auth change fails every request checked before it
// applies (ErrAuthOldRevision).
func (id *etcdIdentity) useRoot() error {
	t, err := pki.ClientTLS(id.dir.CACert(), id.dir.Cert(pki.RootLeaf), id.dir.Key(pki.RootLeaf))
	if err != nil {
		return fmt.Errorf("agent: root identity from %s: %w", id.dir, err)
	}
	id.root.tls = t
	id.root.inUse.Store(true)
	id.log.Info("joining under the root identity; the node's etcd user and role follow once the member is a voter", "user", rbac.NodeRole(id.name))
	return nil
}

// finish makes the part of this node's etcd identity that ensure left for
// after the join, then switches to it; a no-op when it left none.
func (id *etcdIdentity) finish(ctx context.Context) error {
	if !id.root.left {
		return nil
	}
	if err := id.ensureFull(ctx); err != nil {
		return err
	}
	if id.root.inUse.Load() {
		if err := id.switchToNode(); err != nil {
			return err
		}
	}
	id.root.left = false
	return nil
}

// switchToNode replaces the store client a joining machine connected
// under the root identity with one under its node's, now made. The old
// client stays open until shutdown: the heartbeat's first lease is kept
// alive over it (closing it would lose the lease, and with it the
// heartbeat the leader revokes a node's identity on), and the watches the
// heartbeat controller opened on it go on. Everything else reads the
// client anew (client, store), and the gossip key follower, which holds
// its store, is started again by the voter phase.
func (id *etcdIdentity) switchToNode() error {
	id.root.inUse.Store(false)
	old, err := id.reconnect()
	if err != nil {
		id.root.inUse.Store(true)
		return fmt.Errorf("agent: connect as %s: %w", rbac.NodeRole(id.name), err)
	}
	id.root.retired = old
	id.log.Info("etcd identity of this node made; its clients use it now", "user", rbac.NodeRole(id.name))
	return nil
}

// ensureFull makes this node's etcd user and role (rbac.EnsureSelf).
func (id *etcdIdentity) ensureFull(ctx context.Context) error {
	if err := rbac.EnsureSelf(ctx, id.dir, id.endpoints(), id.prefix, id.name, id.roles, id.bootstrap, id.log); err != nil {
		return fmt.Errorf("agent: etcd identity: %w", err)
	}
	return nil
}

// holdsRoot tells whether this is a control-plane machine with the root
// certificate, which makes its own etcd identity.
func (id *etcdIdentity) holdsRoot() bool {
	return id.dir != "" && id.controlPlane && exists(id.dir.Cert(pki.RootLeaf))
}

// warning logs a failed attempt at the node's etcd identity that untilDone
// tries again.
func (id *etcdIdentity) warning(err error, next time.Duration) {
	id.log.Warn("etcd identity not made; trying again", "err", err, "in", next)
}

// reconnect replaces the store client with one made anew under the client
// identity now in use (clientTLS) and returns the client it replaced.
func (a *Agent) reconnect() (*clientv3.Client, error) {
	old := a.conn.Load()
	cli, err := a.etcdClient(old.cli.Endpoints(), 5*time.Second)
	if err != nil {
		return nil, err
	}
	st, err := store.New(cli, a.cfg.Prefix)
	if err != nil {
		cli.Close()
		return nil, err
	}
	a.use(cli, st)
	if a.cfg.OnConnect != nil {
		a.cfg.OnConnect(st)
	}
	return old.cli, nil
}

// identityRetry paces the attempts of the identity's changes (untilDone).
func identityRetry() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 5 * time.Second}
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

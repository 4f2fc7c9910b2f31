package joinendpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is the join endpoint a control-plane machine serves
// (package enroll, docs/security.md).
type Config struct {
	Name string
	// Dir is the machine's pki.dir: the endpoint starts once it holds the
	// CA key, the secrets key and the coordinator identity (the agent's
	// ensurePKI issues them on a control-plane machine).
	Dir pki.Dir
	// Listen is host:port (join.listen).
	Listen string
	// Endpoints are etcd client URLs, the local member's first.
	Endpoints []string
	Prefix    string
	// TokenFile is the machine's token. On the bootstrap machine it is
	// registered as the first join token (all roles, no expiry); it is the
	// gossip secret until the machine holds one from its own join.
	TokenFile string
	Bootstrap bool
	RateLimit enroll.RateLimit
	// EnsureIdentity makes a joining node's etcd user and role with the
	// roles it joins with; nil: rbac.IdentityEnsurer through the endpoint's
	// own (coordinator) client.
	EnsureIdentity func(ctx context.Context, name string, roles []api.Role) error
	// Poll is how often Run looks for the keys it needs; zero: 1s.
	Poll time.Duration
	// OnRequest, when set, is told of every request and its outcome
	// (join.ServerConfig.OnRequest; the agent's metrics).
	OnRequest func(path, reason string)
	// TokenPruneAfter is how long an expired or revoked token is kept
	// (join.tokenPruneAfter); zero: token.DefaultPruneAfter.
	// TokenPruneInterval paces the pruning; zero: an hour.
	TokenPruneAfter    time.Duration
	TokenPruneInterval time.Duration
	// Runtime runs the endpoint's controllers (token pruning): the agent's
	// (Agent.Runtime), so that their health feeds the agent's; nil: one of
	// the endpoint's own.
	Runtime *controller.Runtime
}

// Endpoint serves the join endpoint as the coordinator's identity (it
// reads tokens, which node identities may not). New starts nothing; Run
// blocks until ctx ends.
//
//	wait for ca.key, secrets.key, coordinator cert ──▶ dial etcd as nico-coordinator
//	  ──▶ [bootstrap] register tokenFile as the first token ──▶ serve HTTPS on Listen
type Endpoint struct {
	cfg Config
	log *slog.Logger
	// Now is the clock; tests replace it.
	Now func() time.Time
	// Ready, when set, is closed once the endpoint listens.
	Ready     chan struct{}
	readyOnce sync.Once
	rt        *controller.Runtime // cfg.Runtime, or the endpoint's own
}

// New returns the endpoint for cfg.
func New(cfg Config, log *slog.Logger) *Endpoint {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = store.DefaultPrefix
	}
	j := &Endpoint{cfg: cfg, log: log.With("component", "join-endpoint", "node", cfg.Name), Now: time.Now, rt: cfg.Runtime}
	if j.rt == nil {
		// Its controllers are tick-only: a runtime with no store.
		j.rt = controller.New(nil, controller.WithLogger(j.log))
	}
	return j
}

// Run serves until ctx ends, and returns nil then: the join-endpoint
// controller (serving.go) keeps it serving on the endpoint's runtime, and
// Run waits for the last serve to end. A serve that failed is logged,
// counted against the runtime's health and started again after a backoff.
func (j *Endpoint) Run(ctx context.Context) error {
	var cur *serving
	err := j.rt.Run(ctx, j.server(&cur))
	if cur != nil {
		cur.stop()
	}
	return err
}

// caSum is the contents of ca.crt and ca.key ("" when unreadable).
func (j *Endpoint) caSum() string {
	crt, err1 := os.ReadFile(j.cfg.Dir.CACert())
	key, err2 := os.ReadFile(j.cfg.Dir.CAKey())
	if err1 != nil || err2 != nil {
		return ""
	}
	return string(crt) + string(key)
}

// serve serves with the CA files as they are until ctx ends; listening is
// called once it listens.
func (j *Endpoint) serve(ctx context.Context, listening func()) error {
	d := j.cfg.Dir
	ca, err := pki.LoadCA(d.CACert(), d.CAKey())
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	box, err := secretbox.Load(d.SecretsKey())
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	tlsCfg, err := pki.ClientTLS(d.CACert(), d.Cert(pki.CoordinatorLeaf), d.Key(pki.CoordinatorLeaf))
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: j.cfg.Endpoints, DialTimeout: 5 * time.Second, AutoSyncInterval: 30 * time.Second, TLS: tlsCfg})
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	defer cli.Close()
	st, err := store.New(cli, j.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	reg := token.NewRegistry(secrets.New(st, box))
	if j.cfg.Bootstrap && j.cfg.TokenFile != "" {
		if err := j.registerBootstrapToken(ctx, reg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	rt := j.rt
	pruned := make(chan struct{})
	pctx, stopPrune := context.WithCancel(ctx)
	go func() {
		defer close(pruned)
		if err := rt.Run(pctx, j.tokenPrune(reg)); err != nil {
			j.log.Error("join token pruning stopped", "err", err)
		}
	}()
	defer func() { stopPrune(); <-pruned }()
	ensure := j.cfg.EnsureIdentity
	if ensure == nil {
		ensure = rbac.IdentityEnsurer(cli.Auth, j.cfg.Prefix)
	}
	caPEM, err := os.ReadFile(d.CACert())
	if err != nil {
		return fmt.Errorf("join endpoint: %w", err)
	}
	srv, err := enroll.NewServer(enroll.ServerConfig{
		Tokens:              reg,
		Signer:              ca,
		CAPEM:               caPEM,
		EnsureIdentityRoles: ensure,
		Cluster:             func(ctx context.Context) (enroll.Cluster, error) { return j.cluster(ctx, cli, st) },
		ControlPlane:        j.bundle,
		RateLimit:           j.cfg.RateLimit,
		Nonces:              enroll.NewEtcdNonces(st),
		NodeAlive:           enroll.HeartbeatOf(st),
		NodeRemoved:         func(ctx context.Context, name string) (bool, error) { return nodeRemoved(ctx, st, name) },
		Now:                 j.Now,
		Log:                 j.log,
		OnRequest:           j.cfg.OnRequest,
	})
	if err != nil {
		return err
	}
	cert, err := enroll.ServerCert(ca, j.cfg.Name, j.hosts(), j.Now())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", j.cfg.Listen)
	if err != nil {
		return fmt.Errorf("join endpoint: join.listen %s: %w", j.cfg.Listen, err)
	}
	j.log.Info("serving the join endpoint", "listen", ln.Addr().String(), "ca", ca.Cert.Subject.CommonName)
	listening()
	if j.Ready != nil {
		j.readyOnce.Do(func() { close(j.Ready) })
	}
	return srv.Serve(ctx, ln, cert)
}

// registerBootstrapToken stores the bootstrap machine's token as the first
// join token: every role, no expiry. A token already there (a restart, or
// revoked since) is left as it is.
func (j *Endpoint) registerBootstrapToken(ctx context.Context, reg *token.Registry) error {
	raw, err := os.ReadFile(j.cfg.TokenFile)
	if err != nil {
		return fmt.Errorf("join endpoint: tokenFile: %w", err)
	}
	tok, err := token.Parse(string(raw))
	if err != nil {
		j.log.Warn("tokenFile holds no join token; machines can join only with tokens from nicoctl token create", "err", err)
		return nil
	}
	b := &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 5 * time.Second}
	// Retried until ctx ends: the endpoint cannot serve the bootstrap
	// token before it is registered.
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		_, err := reg.Register(ctx, tok, token.Spec{Roles: token.AllRoles, Description: "bootstrap token (tokenFile of " + j.cfg.Name + ")"}, j.Now())
		switch {
		case err == nil:
			j.log.Info("registered the bootstrap token", "token", tok.ID)
		case errors.Is(err, store.ErrExists):
			return struct{}{}, nil
		default:
			j.log.Debug("registering the bootstrap token", "token", tok.ID, "err", err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0))
	if err != nil {
		return fmt.Errorf("join endpoint: register the bootstrap token: %w", err)
	}
	return nil
}

// cluster tells a joining machine the voters' client URLs and the gossip
// secret and generation.
func (j *Endpoint) cluster(ctx context.Context, cli *clientv3.Client, st *store.Store) (enroll.Cluster, error) {
	var c enroll.Cluster
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return c, fmt.Errorf("member list: %w", err)
	}
	for _, m := range ml.Members {
		if !m.IsLearner {
			c.Endpoints = append(c.Endpoints, m.ClientURLs...)
		}
	}
	// The current secret: after nicoctl gossip rotate-key --new-secret,
	// the one sealed to this machine (a machine joining now had no node
	// certificate to seal it to); before, its gossip.secret or token.
	secret, gen, err := gossipkey.CurrentSecret(ctx, st, gossipkey.Member{Name: j.cfg.Name, Dir: j.cfg.Dir})
	if err != nil {
		return c, err
	}
	if secret == nil {
		if secret, err = GossipSecret(j.cfg.Dir, j.cfg.TokenFile); err != nil {
			return c, err
		}
	}
	c.GossipSecret, c.GossipGeneration = secret, gen
	return c, nil
}

// bundle reads what a control-plane machine gets besides its node
// certificate.
func (j *Endpoint) bundle(context.Context) (*enroll.Bundle, error) {
	d := j.cfg.Dir
	files := map[string]*[]byte{}
	var b enroll.Bundle
	var caKey, coordCert, coordKey, rootCert, rootKey []byte
	files[d.CAKey()] = &caKey
	files[d.SecretsKey()] = &b.SecretsKey
	files[d.Cert(pki.CoordinatorLeaf)] = &coordCert
	files[d.Key(pki.CoordinatorLeaf)] = &coordKey
	files[d.Cert(pki.RootLeaf)] = &rootCert
	files[d.Key(pki.RootLeaf)] = &rootKey
	for path, dst := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("control-plane bundle: %w", err)
		}
		*dst = data
	}
	b.CAKeyPEM = string(caKey)
	b.CoordinatorCertPEM, b.CoordinatorKeyPEM = string(coordCert), string(coordKey)
	b.RootCertPEM, b.RootKeyPEM = string(rootCert), string(rootKey)
	return &b, nil
}

// hosts are the names the endpoint's certificate is issued for: the hosts
// of Listen and of the local member's client URL. (Clients check the chain
// to the CA they pinned, not the name.)
func (j *Endpoint) hosts() []string {
	var hs []string
	if h, _, err := net.SplitHostPort(j.cfg.Listen); err == nil && h != "" {
		hs = append(hs, h)
	}
	for _, ep := range j.cfg.Endpoints[:min(1, len(j.cfg.Endpoints))] {
		if u, err := url.Parse(ep); err == nil && u.Hostname() != "" {
			hs = append(hs, u.Hostname())
		}
	}
	return append(hs, "localhost", "127.0.0.1")
}

// nodeRemoved tells whether node name was removed from the cluster (its
// node object says so): such a node's certificate is not renewed.
func nodeRemoved(ctx context.Context, st *store.Store, name string) (bool, error) {
	n := &api.Node{}
	switch err := st.Get(ctx, store.NodeKey(name), n); {
	case errors.Is(err, store.ErrNotFound):
		return false, nil // not registered yet: its own certificate is all it has
	case err != nil:
		return false, err
	}
	return n.Status.Phase == api.NodeRemoved, nil
}

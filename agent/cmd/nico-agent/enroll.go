package main

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/agent/joinendpoint"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// joinToken reads tokenFile as a join token; false when there is none or
// it holds something else (older clusters kept any text there, for gossip
// keys only).
func joinToken(cfg config.Agent) bool {
	if cfg.TokenFile == "" {
		return false
	}
	raw, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return false
	}
	_, err = token.Parse(string(raw))
	return err == nil
}

// obtainCerts is the agent's ObtainCerts: joining with tokenFile through
// join.endpoints; nil without a join token.
func obtainCerts(cfg config.Agent, log *slog.Logger) agent.ObtainCertsFunc {
	if !joinToken(cfg) {
		return nil
	}
	return joinendpoint.Obtain(joinendpoint.ClientConfig{
		Name: cfg.Name, Roles: roles(cfg), Endpoints: cfg.JoinEndpoint.Endpoints, TokenFile: cfg.TokenFile,
	}, log)
}

// renewNodeCert is the agent's RenewNodeCert: on a machine without ca.key,
// renewing the node certificate through join.endpoints (POST /v1/renew).
func renewNodeCert(cfg config.Agent, log *slog.Logger) agent.RenewNodeCertFunc {
	return joinendpoint.Renew(cfg.JoinEndpoint.Endpoints, log)
}

// joinFirst gets the machine's certificates through the join endpoint
// before anything else starts, on a machine that is not the bootstrap one
// and has no ca.crt yet: the gossip mesh needs the secret the join brings.
func joinFirst(ctx context.Context, cfg config.Agent, log *slog.Logger) error {
	d := pki.Dir(cfg.PKI.Dir)
	obtain := obtainCerts(cfg, log)
	if cfg.Bootstrap || obtain == nil || d == "" {
		return nil
	}
	if _, err := os.Stat(d.CACert()); err == nil {
		return nil
	}
	return obtain(ctx, d)
}

// serveJoin runs the join endpoint on a control-plane machine, its
// controllers on rt (the agent's runtime; nil: its own); it starts
// serving once the machine holds the CA key. The returned function stops
// it and waits.
func serveJoin(ctx context.Context, cfg config.Agent, rt *controller.Runtime, onRequest func(path, reason string), log *slog.Logger) (wait func()) {
	if !cfg.HasRole(config.RoleControlPlane) || cfg.PKI.Dir == "" || cfg.JoinEndpoint.Listen == "" {
		return func() {}
	}
	burst, every := cfg.JoinEndpoint.Rate()
	je := joinendpoint.New(joinendpoint.Config{
		Name: cfg.Name, Dir: pki.Dir(cfg.PKI.Dir), Listen: cfg.JoinEndpoint.Listen,
		Endpoints: append([]string{cfg.Etcd.ClientURL}, cfg.Etcd.Endpoints...),
		Prefix:    cfg.Store.Prefix, TokenFile: cfg.TokenFile, Bootstrap: cfg.Bootstrap,
		RateLimit: rateLimit(burst, every), TokenPruneAfter: cfg.JoinEndpoint.TokenPruneAfter,
		Runtime:   rt, // the agent's: its controllers' health is the agent's
		OnRequest: onRequest,
	}, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := je.Run(ctx); err != nil {
			log.Error("join endpoint stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// roles are the machine's roles as api roles.
func roles(cfg config.Agent) []api.Role {
	out := make([]api.Role, 0, len(cfg.Roles))
	for _, r := range cfg.Roles {
		if !slices.Contains(out, api.Role(r)) {
			out = append(out, api.Role(r))
		}
	}
	return out
}

// rateLimit is the endpoint's token bucket; zeros take the default's
// value (join.DefaultRateLimit).
func rateLimit(burst int, every time.Duration) enroll.RateLimit {
	r := enroll.DefaultRateLimit
	if burst > 0 {
		r.Burst = burst
	}
	if every > 0 {
		r.Every = every
	}
	return r
}

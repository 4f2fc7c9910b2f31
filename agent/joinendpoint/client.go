package joinendpoint

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// ClientConfig is how a machine with no certificate joins.
type ClientConfig struct {
	Name  string
	Roles []api.Role
	// Endpoints are join endpoints (host:port), tried in order.
	Endpoints []string
	// TokenFile holds the join token <id>.<secret>.
	TokenFile string
	// Retry returns the policy that paces attempts while no endpoint
	// answers; nil: 500ms to 30s.
	Retry func() backoff.BackOff
}

// Obtain returns the agent's ObtainCerts: it joins with the
// token in TokenFile, retrying while no endpoint answers (the control
// plane may still be starting) or one asks to wait, and stops at once on
// a refusal: unknown, expired or revoked token, role not allowed, CA proof
// mismatch. The error then says which, and never shows the secret.
func Obtain(cfg ClientConfig, log *slog.Logger) func(ctx context.Context, dir pki.Dir) error {
	if cfg.Retry == nil {
		cfg.Retry = func() backoff.BackOff {
			return &backoff.ExponentialBackOff{InitialInterval: 500 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 30 * time.Second}
		}
	}
	log = log.With("component", "join", "node", cfg.Name)
	return func(ctx context.Context, dir pki.Dir) error {
		raw, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("join: tokenFile: %w", err)
		}
		tok, err := token.Parse(string(raw))
		if err != nil {
			return fmt.Errorf("join: tokenFile %s: %w", cfg.TokenFile, err)
		}
		if len(cfg.Endpoints) == 0 {
			return errors.New("join: no join endpoints: set join.endpoints or gossip.seeds")
		}
		cc := enroll.ClientConfig{Endpoints: cfg.Endpoints, Token: tok, Name: cfg.Name, Roles: cfg.Roles, Log: log}
		retryable := func(err error) bool {
			return errors.Is(err, enroll.ErrUnreachable) || errors.Is(err, enroll.ErrServer) || errors.Is(err, enroll.ErrRateLimited)
		}
		obtain := obtainOnce(cc, dir, tok, retryable, log)
		var last error
		_, err = backoff.Retry(ctx, func() (struct{}, error) {
			err := obtain(ctx)
			if last = err; err != nil && !retryable(err) {
				return struct{}{}, backoff.Permanent(err)
			}
			return struct{}{}, err
		}, backoff.WithBackOff(cfg.Retry()), backoff.WithMaxElapsedTime(0))
		if err != nil && ctx.Err() != nil && last != nil {
			// Both, so that errors.Is finds either.
			return fmt.Errorf("join: gave up: %w: %w", ctx.Err(), last)
		}
		return err
	}
}

// obtainOnce is one attempt of Obtain.
func obtainOnce(cc enroll.ClientConfig, dir pki.Dir, tok token.Token, retryable func(error) bool, log *slog.Logger) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := enroll.Obtain(ctx, cc, dir)
		var rl *enroll.RateLimitedError
		switch {
		case err == nil:
			log.Info("joined: got this machine's certificate", "token", tok.ID, "controlPlane", resp.ControlPlane != nil)
			return nil
		case errors.As(err, &rl):
			log.Warn("join endpoint asks to wait", "retryAfter", rl.RetryAfter)
			select {
			case <-ctx.Done():
			case <-time.After(rl.RetryAfter):
			}
		case retryable(err):
			log.Warn("no join endpoint answered; retrying", "err", err)
		}
		return err
	}
}

// Renew returns the agent's RenewNodeCert (agent.RenewNodeCertFunc): it
// renews the node certificate in dir through endpoints (join.endpoints,
// host:port), tried in order (join.Renew: POST /v1/renew, authenticated by
// the current certificate).
func Renew(endpoints []string, log *slog.Logger) func(ctx context.Context, dir pki.Dir) (*x509.Certificate, error) {
	log = log.With("component", "renew")
	return func(ctx context.Context, dir pki.Dir) (*x509.Certificate, error) {
		if len(endpoints) == 0 {
			return nil, errors.New("agent: no join endpoints to renew the node certificate through: set join.endpoints or gossip.seeds")
		}
		return enroll.Renew(ctx, enroll.RenewConfig{Endpoints: endpoints, Log: log}, dir)
	}
}

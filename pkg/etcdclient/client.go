// Package etcdclient is the one way nico builds an etcd client: with the
// program's TLS identity (docs/security.md), quiet logging, and the TLS
// configuration carried by the client so that short-lived clients dialled
// from it (etcdadmin's per-member calls) present the same identity.
package etcdclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ErrPlaintext is returned by New for an https endpoint without a TLS
// configuration, or an http endpoint with one.
var ErrPlaintext = errors.New("etcdclient: scheme and TLS do not match")

// Config is a client's endpoints, timings and TLS identity.
type Config struct {
	Endpoints   []string
	DialTimeout time.Duration
	// AutoSyncInterval, when set, refreshes the endpoints from the member
	// list that often.
	AutoSyncInterval time.Duration
	// TLS is the client's identity and the CA it trusts (Files.Config); nil
	// only for a plaintext etcd, which nico's configuration never accepts.
	TLS *tls.Config
	// RedialAfter, when set, redials a lost connection after that long,
	// backing off to at most RedialMax, instead of gRPC's default (a
	// second, growing to two minutes). For a client bound to one member
	// that restarts and must be asked again within milliseconds.
	RedialAfter time.Duration
}

// RedialMax bounds the pause between redials of a client with
// RedialAfter set: a member that stays down costs a dial a second.
const RedialMax = time.Second

// KeepAliveTime and KeepAliveTimeout are every client's gRPC keepalive:
// a ping after KeepAliveTime without a frame from the server, the
// connection dropped when no answer comes within KeepAliveTimeout. 10 s is
// gRPC's floor for the time (a lower value is raised to it) and above
// etcd's enforcement minimum (5 s): a silent endpoint is left about 12 s
// after it went silent.
const (
	KeepAliveTime    = 10 * time.Second
	KeepAliveTimeout = 2 * time.Second
)

type tlsKey struct{}

// New returns a client for cfg. It does not wait for a connection.
func New(cfg Config) (*clientv3.Client, error) {
	for _, ep := range cfg.Endpoints {
		if https := strings.HasPrefix(ep, "https://"); https != (cfg.TLS != nil) && strings.Contains(ep, "://") {
			if cfg.TLS == nil {
				return nil, fmt.Errorf("%w: endpoint %s needs a client certificate and CA (tls files)", ErrPlaintext, ep)
			}
			return nil, fmt.Errorf("%w: endpoint %s is not https; etcd runs with TLS", ErrPlaintext, ep)
		}
	}
	ctx := context.WithValue(context.Background(), tlsKey{}, cfg.TLS)
	var dial []grpc.DialOption
	if cfg.RedialAfter > 0 {
		dial = append(dial, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: cfg.RedialAfter, Multiplier: 1.6, Jitter: 0.2, MaxDelay: max(RedialMax, cfg.RedialAfter)},
			// gRPC bounds each attempt by this or the backoff, whichever
			// is longer; its default, which an explicit backoff drops.
			MinConnectTimeout: 20 * time.Second,
		}))
	}
	cli, err := clientv3.New(clientv3.Config{
		DialOptions:      dial,
		Endpoints:        cfg.Endpoints,
		DialTimeout:      cfg.DialTimeout,
		AutoSyncInterval: cfg.AutoSyncInterval,
		// Keepalives find a connection to a host that went silent (cut
		// off: no reset, no error) so that the balancer leaves it;
		// without them every request sent there waits out its deadline,
		// and a lease kept alive there (a coordinator's session) expires.
		DialKeepAliveTime:    KeepAliveTime,
		DialKeepAliveTimeout: KeepAliveTimeout,
		TLS:                  cfg.TLS,
		Logger:               zap.NewNop(),
		Context:              ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("etcdclient: %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// TLSOf returns the TLS configuration cli was made with by New (nil for a
// plaintext client or one New did not make), to dial more clients with the
// same identity.
func TLSOf(cli *clientv3.Client) *tls.Config {
	if cli == nil {
		return nil
	}
	t, _ := cli.Ctx().Value(tlsKey{}).(*tls.Config)
	return t
}

// Files are the PEM files of a program's client identity (the tls.caFile,
// tls.certFile and tls.keyFile keys; pki.Dir for the agent).
type Files struct {
	CA, Cert, Key string
}

// Load returns the tls.Config for f (pki.ClientTLS: the key pair is
// re-read on every handshake, so a renewed certificate is used at once).
// It returns nil when no endpoint is https, which only a plaintext test
// cluster has: the configuration refuses http URLs.
func (f Files) Load(endpoints []string) (*tls.Config, error) {
	if !slices.ContainsFunc(endpoints, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		return nil, nil
	}
	t, err := pki.ClientTLS(f.CA, f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("etcdclient: TLS identity (tls.caFile %s, tls.certFile %s, tls.keyFile %s): %w", f.CA, f.Cert, f.Key, err)
	}
	return t, nil
}

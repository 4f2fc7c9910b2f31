// Package etcdnsproxy is a namespacing etcd proxy for a Kubernetes
// distribution that cannot set an etcd key prefix of its own (k3s: it
// keeps its bootstrap data at /bootstrap/<hash> and the API server's at
// /registry/...). The distribution talks etcd's gRPC API to the proxy on
// loopback; the proxy prefixes every key with the cluster's namespace
// (/clusters/<c>/) and forwards the request to nico's etcd under the
// cluster's own etcd identity (kubepki's kubernetes:<c>, whose role
// reaches that namespace and nothing else).
//
// Why not `etcd grpc-proxy start --namespace`: etcd's proxy refuses a
// backend certificate with a Common Name (it would lend that user to every
// client; etcd PR #10343, issue #11970), and the API server has no way to
// send a user name and password instead, so through etcd's proxy the
// cluster could only reach etcd as no user at all. This proxy is built
// from the same parts (etcd's grpcproxy and namespace packages), with the
// cluster's certificate towards etcd and, towards its clients, a TLS
// listener that asks for a certificate of the cluster's identity.
//
//	distribution --TLS, client cert CN kubernetes:<c>--> proxy (127.0.0.1)
//	proxy --TLS, the same identity, keys under /clusters/<c>/--> nico's etcd
//
// Served: KV (with no cache), Watch (each client stream passed through to one etcd
// stream, so that watch-progress requests reach etcd), Lease and
// Maintenance (Status, for the client's version checks). Not served: Cluster (a member list would hand the
// distribution etcd's own URLs, outside the namespace), Auth, Election and
// Lock.
package etcdnsproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// ErrConfig marks a Config that cannot run; the error names the field.
var ErrConfig = errors.New("etcdnsproxy: bad config")

// Config is one cluster's proxy.
type Config struct {
	// Namespace is prefixed to every key, "/clusters/<c>/" (with its
	// trailing slash: every key a client names then lies inside it).
	Namespace string
	// Endpoints are nico's etcd client URLs.
	Endpoints []string
	// BackendTLS presents the cluster's etcd identity and trusts the etcd
	// servers' CA.
	BackendTLS *tls.Config
	// ServerTLS is the listener's: its serving certificate, and ClientCAs,
	// the CA a client's certificate must chain to (New asks for one).
	ServerTLS *tls.Config
	// ClientCommonName, when set, is the only Common Name a client's
	// certificate may carry (the cluster's etcd user, kubernetes:<c>).
	ClientCommonName string
	// Logger gets the proxy's events (slog.Default when nil).
	Logger *slog.Logger
}

// Proxy is a listening, not yet serving, namespacing proxy.
type Proxy struct {
	cfg Config
	ln  net.Listener
}

// New checks cfg and listens on listen (host:port; port 0 picks one).
// It starts no goroutine: Run serves.
func New(cfg Config, listen string) (*Proxy, error) {
	switch {
	case !strings.HasPrefix(cfg.Namespace, "/") || !strings.HasSuffix(cfg.Namespace, "/") || len(cfg.Namespace) < 3:
		return nil, fmt.Errorf("%w: namespace %q: want a key prefix that starts and ends with '/', as /clusters/NAME/", ErrConfig, cfg.Namespace)
	case len(cfg.Endpoints) == 0:
		return nil, fmt.Errorf("%w: endpoints: want at least one etcd client URL", ErrConfig)
	case cfg.BackendTLS == nil || (len(cfg.BackendTLS.Certificates) == 0 && cfg.BackendTLS.GetClientCertificate == nil):
		return nil, fmt.Errorf("%w: backend TLS: want the cluster's etcd client certificate", ErrConfig)
	case cfg.ServerTLS == nil || (len(cfg.ServerTLS.Certificates) == 0 && cfg.ServerTLS.GetCertificate == nil) || cfg.ServerTLS.ClientCAs == nil:
		return nil, fmt.Errorf("%w: server TLS: want a serving certificate and the CA of the clients' certificates", ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	srv := cfg.ServerTLS.Clone()
	harden(srv, cfg.ClientCommonName)
	if get := srv.GetConfigForClient; get != nil {
		// The config of one handshake (Files' carries the client CA read
		// again) gets the same requirements as the listener's.
		srv.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(h)
			if err != nil || c == nil {
				return c, err
			}
			if c.ClientCAs == nil {
				return nil, fmt.Errorf("%w: server TLS: the handshake's config has no CA of the clients' certificates", ErrConfig)
			}
			c = c.Clone()
			harden(c, cfg.ClientCommonName)
			return c, nil
		}
	}
	cfg.ServerTLS = srv
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("etcdnsproxy: listen %s: %w", listen, err)
	}
	return &Proxy{cfg: cfg, ln: ln}, nil
}

// harden makes srv ask for, and verify, a client certificate, with the
// Common Name cn when cn is set.
func harden(srv *tls.Config, cn string) {
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	if srv.MinVersion == 0 {
		srv.MinVersion = tls.VersionTLS12
	}
	if cn != "" {
		srv.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 || chains[0][0].Subject.CommonName != cn {
				return fmt.Errorf("etcdnsproxy: client certificate: want Common Name %q", cn)
			}
			return nil
		}
	}
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Run serves until ctx ends, then stops the server and its etcd client and
// returns nil; or returns the error that stopped serving.
func (p *Proxy) Run(ctx context.Context) error {
	defer p.ln.Close()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: p.cfg.Endpoints, TLS: p.cfg.BackendTLS, Context: ctx,
		DialTimeout: 5 * time.Second, DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("etcdnsproxy: etcd client: %w", err)
	}
	defer cli.Close()
	ns := p.cfg.Namespace
	cli.KV = namespace.NewKV(cli.KV, ns)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, ns)
	cli.Lease = namespace.NewLease(cli.Lease, ns)

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leasep, leaseDone := grpcproxy.NewLeaseProxy(pctx, cli)
	server := grpc.NewServer(grpc.Creds(credentials.NewTLS(p.cfg.ServerTLS)))
	pb.RegisterKVServer(server, &kvServer{kv: cli.KV})
	pb.RegisterWatchServer(server, &watchServer{ns: []byte(ns), client: pb.NewWatchClient(cli.ActiveConnection())})
	pb.RegisterLeaseServer(server, leasep)
	pb.RegisterMaintenanceServer(server, grpcproxy.NewMaintenanceProxy(cli))

	p.cfg.Logger.Info("etcd namespace proxy serving", "listen", p.ln.Addr().String(), "namespace", ns, "endpoints", strings.Join(p.cfg.Endpoints, ","))
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- server.Serve(p.ln)
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	server.Stop()
	cancel()
	wg.Wait()
	<-leaseDone
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
		return fmt.Errorf("etcdnsproxy: serve: %w", serveErr)
	}
	p.cfg.Logger.Info("etcd namespace proxy stopped", "listen", p.ln.Addr().String())
	return nil
}

package metrics

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/homystack/nico/pkg/httpserve"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNeedsTLS: an address beyond loopback was given no TLS configuration
// (httpserve's rule).
var ErrNeedsTLS = httpserve.ErrNeedsTLS

// Server serves /metrics and /debug/pprof/ of one registry. On a loopback
// address it serves plain HTTP; anywhere else it serves only TLS that
// requires a client certificate of the cluster CA (TLS).
type Server struct {
	// Listen is host:port; "" serves nothing.
	Listen string
	// TLS is required (with ClientAuth RequireAndVerifyClientCert) when
	// Listen is not loopback; pki.ServerTLS makes it.
	TLS      *tls.Config
	Registry *Registry
	Log      *slog.Logger

	ep *httpserve.Endpoint
}

// endpoint is the server's endpoint, made on first use.
func (s *Server) endpoint() *httpserve.Endpoint {
	if s.ep == nil {
		s.ep = &httpserve.Endpoint{Name: "metrics", Listen: s.Listen, TLS: s.TLS, Handler: s.Handler(), Log: s.Log}
	}
	return s.ep
}

// Bind opens the listener (Listen "" opens none). It checks the TLS rule
// first: an address beyond loopback needs TLS that requires client
// certificates.
func (s *Server) Bind() error { return s.endpoint().Bind() }

// Addr is the bound address, or "" before Bind.
func (s *Server) Addr() string { return s.endpoint().Addr() }

// Handler is the server's mux: /metrics and /debug/pprof/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.Registry.Gatherer(), promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Run binds (unless Bind was called) and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error { return s.endpoint().Serve(ctx) }

// Start binds, then serves in the background until ctx ends or the
// returned stop is called; stop waits for the server to end. A refused TLS
// rule is returned; an address that cannot be bound (in use) is logged and
// nothing is served: a node's agent must not stop over its metrics port.
func (s *Server) Start(ctx context.Context) (stop func(), err error) {
	return s.endpoint().Start(ctx, nil)
}

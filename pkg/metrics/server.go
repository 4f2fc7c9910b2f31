package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNeedsTLS: an address beyond loopback was given no TLS configuration.
var ErrNeedsTLS = errors.New("metrics: a listen address other than loopback needs TLS with client certificates")

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

	ln net.Listener
}

// Loopback tells whether the host of listen (host:port) is a loopback
// address or "localhost"; an empty host means every address, not loopback.
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Bind opens the listener (Listen "" opens none). It checks the TLS rule
// first: an address beyond loopback needs TLS that requires client
// certificates.
func (s *Server) Bind() error {
	if s.Listen == "" {
		return nil
	}
	if !Loopback(s.Listen) && (s.TLS == nil || s.TLS.ClientAuth != tls.RequireAndVerifyClientCert) {
		return fmt.Errorf("%w: %q", ErrNeedsTLS, s.Listen)
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", s.Listen, err)
	}
	if !Loopback(s.Listen) {
		ln = tls.NewListener(ln, s.TLS)
	}
	s.ln = ln
	return nil
}

// Addr is the bound address, or "" before Bind.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

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
func (s *Server) Run(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Bind(); err != nil {
			return err
		}
	}
	if s.ln == nil {
		<-ctx.Done()
		return nil
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if s.Log != nil {
		// Refused handshakes (no client certificate) are the scraper's
		// problem, not this program's: debug.
		srv.ErrorLog = slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug)
	} else {
		srv.ErrorLog = log.New(io.Discard, "", 0)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	if s.Log != nil {
		s.Log.Info("serving metrics", "addr", s.Addr(), "tls", !Loopback(s.Listen))
	}
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("metrics: serve: %w", err)
	}
}

// Start binds, then serves in the background until ctx ends or the
// returned stop is called; stop waits for the server to end. A refused TLS
// rule is returned; an address that cannot be bound (in use) is logged and
// nothing is served: a node's agent must not stop over its metrics port.
func (s *Server) Start(ctx context.Context) (stop func(), err error) {
	if err := s.Bind(); err != nil {
		if errors.Is(err, ErrNeedsTLS) || s.Log == nil {
			return nil, err
		}
		s.Log.Error("not serving metrics", "err", err)
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil && s.Log != nil {
			s.Log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

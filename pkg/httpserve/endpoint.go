package httpserve

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
	"time"
)

// ErrNeedsTLS: an address beyond loopback was given no TLS configuration
// that requires client certificates.
var ErrNeedsTLS = errors.New("a listen address other than loopback needs TLS with client certificates")

// shutdownGrace bounds how long a stopping endpoint waits for the requests
// it is still answering.
const shutdownGrace = 2 * time.Second

// Loopback tells whether the host of listen (host:port) is "localhost" or
// a loopback IP; an empty host means every address, not loopback.
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

// Endpoint is one HTTP endpoint: where it listens, its TLS and what it
// serves. The zero Listen serves nothing.
type Endpoint struct {
	// Name names the endpoint in errors and logs ("metrics").
	Name string
	// Listen is host:port; "" serves nothing.
	Listen string
	// TLS is required, with ClientAuth RequireAndVerifyClientCert, when
	// Listen is not loopback (pki.ServerTLS makes it).
	TLS *tls.Config
	// TLSOnLoopback serves TLS on a loopback address too when TLS is set;
	// otherwise a loopback address is always plain HTTP.
	TLSOnLoopback bool
	// Handler answers the requests.
	Handler http.Handler
	// Log, when set, gets the start line and, at debug, the server's own
	// errors (a refused handshake is the client's problem).
	Log *slog.Logger

	ln net.Listener
}

// Bind opens the listener (none for Listen ""), after checking the rule:
// an address beyond loopback needs TLS that requires client certificates.
func (e *Endpoint) Bind() error {
	if e.Listen == "" {
		return nil
	}
	if !Loopback(e.Listen) && (e.TLS == nil || e.TLS.ClientAuth != tls.RequireAndVerifyClientCert) {
		return fmt.Errorf("%s: listen address %q: %w", e.Name, e.Listen, ErrNeedsTLS)
	}
	ln, err := net.Listen("tcp", e.Listen)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", e.Name, e.Listen, err)
	}
	if e.Secure() {
		ln = tls.NewListener(ln, e.TLS)
	}
	e.ln = ln
	return nil
}

// Secure tells whether the endpoint serves TLS.
func (e *Endpoint) Secure() bool {
	return e.TLS != nil && (e.TLSOnLoopback || !Loopback(e.Listen))
}

// Addr is the bound address, "" before Bind.
func (e *Endpoint) Addr() string {
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// Serve binds (unless Bind was called) and serves until ctx ends; every
// request's context derives from ctx, so long-lived ones (event streams)
// end with it before the server shuts down.
func (e *Endpoint) Serve(ctx context.Context) error {
	if e.ln == nil {
		if err := e.Bind(); err != nil {
			return err
		}
	}
	if e.ln == nil {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: e.Handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	if e.Log != nil {
		srv.ErrorLog = slog.NewLogLogger(e.Log.Handler(), slog.LevelDebug)
		e.Log.Info("serving "+e.Name, "addr", e.Addr(), "tls", e.Secure())
	} else {
		srv.ErrorLog = log.New(io.Discard, "", 0)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(e.ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("%s: serve: %w", e.Name, err)
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if err == nil {
		<-errc
	}
	return err
}

// Start binds, then runs serve (Serve, or a caller's function that calls
// it) in the background until ctx ends or the returned stop is called;
// stop waits for it to end. A refused rule (ErrNeedsTLS) is returned; an
// address that cannot be bound (in use) is logged and nothing is served: a
// program must not stop over its metrics or status page port. Without a
// Log every error is returned.
func (e *Endpoint) Start(ctx context.Context, serve func(context.Context) error) (stop func(), err error) {
	if err := e.Bind(); err != nil {
		if errors.Is(err, ErrNeedsTLS) || e.Log == nil {
			return nil, err
		}
		e.Log.Error("not serving "+e.Name, "err", err)
		return func() {}, nil
	}
	if serve == nil {
		serve = e.Serve
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(ctx); err != nil && e.Log != nil {
			e.Log.Error(e.Name+" stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

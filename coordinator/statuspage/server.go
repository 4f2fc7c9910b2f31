package statuspage

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/httpserve"
	"github.com/homystack/nico/pkg/pki"
)

// ViewerIdentity is the Common Name of a client certificate made only to
// read the status page (and nothing in etcd: no etcd user has the name).
const ViewerIdentity = "nico-viewer"

// ReaderIdentities are the client certificate Common Names the page
// accepts over TLS: the operator's (root), the coordinators' and the
// read-only viewer's. A node's certificate (node:NAME) is refused.
var ReaderIdentities = []string{pki.RootIdentity, pki.CoordinatorIdentity, ViewerIdentity}

// ErrNeedsTLS: an address beyond loopback was given no TLS configuration
// that requires client certificates (httpserve's rule).
var ErrNeedsTLS = httpserve.ErrNeedsTLS

// keepAlive is how often an idle event stream gets a comment, so that
// proxies and browsers keep it open.
const keepAlive = 15 * time.Second

// Server serves the page ("/") and its event stream ("/events").
type Server struct {
	// Listen is host:port; "" serves nothing.
	Listen string
	// TLS, when set, is served (on loopback too); it must be set and
	// require client certificates (pki.ServerTLS with requireClient) when
	// Listen is not loopback.
	TLS *tls.Config
	Hub *Hub
	Log *slog.Logger

	ep *httpserve.Endpoint
}

// endpoint is the server's endpoint, made on first use.
func (s *Server) endpoint() *httpserve.Endpoint {
	if s.ep == nil {
		s.ep = &httpserve.Endpoint{Name: "the status page", Listen: s.Listen, TLS: s.TLS, TLSOnLoopback: true, Handler: s.Handler(), Log: s.Log}
	}
	return s.ep
}

// Bind opens the listener (none for Listen ""), after checking the TLS rule.
func (s *Server) Bind() error { return s.endpoint().Bind() }

// Addr is the bound address, "" before Bind.
func (s *Server) Addr() string { return s.endpoint().Addr() }

// Handler serves "/" and "/events", to readers only when over TLS.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	return readersOnly(mux)
}

// readersOnly refuses a TLS client whose certificate names no reader.
func readersOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			if len(r.TLS.PeerCertificates) == 0 || !slices.Contains(ReaderIdentities, r.TLS.PeerCertificates[0].Subject.CommonName) {
				http.Error(w, "forbidden: the status page needs a client certificate of the cluster CA for one of root, nico-coordinator, nico-viewer", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	v, err := s.Hub.View(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	b, err := RenderPage(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_, _ = w.Write(b)
}

// events streams the body fragment as server-sent events named "update":
// the current one at once, then one per burst of store changes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	updates, cancel := s.Hub.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // a reverse proxy must not hold the stream back
	if v, err := s.Hub.View(r.Context()); err == nil {
		if b, err := RenderBody(v); err == nil {
			writeEvent(w, b)
		}
	}
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-updates:
			writeEvent(w, b)
			fl.Flush()
		case <-tick.C:
			_, _ = io.WriteString(w, ": keep-alive\n\n")
			fl.Flush()
		}
	}
}

// writeEvent writes one "update" event; each line of b is a data line.
func writeEvent(w io.Writer, b []byte) {
	var out bytes.Buffer
	out.WriteString("event: update\n")
	for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		out.WriteString("data: ")
		out.Write(bytes.TrimSuffix(line, []byte("\r")))
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
	_, _ = w.Write(out.Bytes())
}

// Run binds (unless Bind was called), then serves and runs the hub until
// ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if s.Addr() == "" {
		if err := s.Bind(); err != nil {
			return err
		}
	}
	if s.Addr() == "" { // Listen "": nothing to serve, no store to watch
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = s.Hub.Run(ctx) }()
	err := s.endpoint().Serve(ctx)
	cancel()
	<-hubDone
	return err
}

// Start binds, then runs the page in the background until ctx ends or the
// returned stop is called; stop waits for it. A refused TLS rule is
// returned; an address that cannot be bound is logged and nothing is
// served: the candidate must not stop over its status page.
func (s *Server) Start(ctx context.Context) (stop func(), err error) {
	return s.endpoint().Start(ctx, s.Run)
}

package enroll

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// Tokens is what the server needs of the token registry (*token.Registry).
type Tokens interface {
	// Get returns token id, or an error wrapping token.ErrUnknown.
	Get(ctx context.Context, id string) (*api.Token, error)
	// Used records a join the token allowed.
	Used(ctx context.Context, id, node string, now time.Time) error
}

// Signer signs a joining machine's certificate request (*pki.CA).
type Signer interface {
	SignCSR(csrPEM []byte, req pki.Request, now time.Time) ([]byte, error)
}

// Cluster is what a joining machine is told besides its certificate.
type Cluster struct {
	Endpoints        []string
	GossipSecret     []byte
	GossipGeneration uint64
}

// ServerConfig is the join endpoint's configuration.
type ServerConfig struct {
	Tokens Tokens
	Signer Signer
	// CAPEM is the CA certificate (bundle) sent to joining machines; its
	// first certificate is the one discovery proves.
	CAPEM []byte
	// EnsureIdentity makes the etcd user and role of node name (package
	// rbac). Nil: nothing to do.
	EnsureIdentity func(ctx context.Context, name string) error
	// EnsureIdentityRoles, when set, is called instead of EnsureIdentity
	// with the roles the node joins with (rbac.IdentityEnsurer): a
	// hypervisor's role writes machines/, a worker's does not.
	EnsureIdentityRoles func(ctx context.Context, name string, roles []api.Role) error
	// Cluster tells the current endpoints and gossip secret.
	Cluster func(ctx context.Context) (Cluster, error)
	// ControlPlane returns the bundle for a control-plane machine.
	ControlPlane func(ctx context.Context) (*Bundle, error)
	// RateLimit per source IP; zero: DefaultRateLimit.
	RateLimit RateLimit
	// Nonces, when set, records every accepted request's nonce for all the
	// cluster's endpoints (EtcdNonces), after this endpoint's own memory.
	// Nil: this endpoint's memory alone.
	Nonces NonceStore
	// NodeAlive, when set, tells whether node name has a live heartbeat
	// (HeartbeatOf); a join for that name is then refused with
	// CodeNameInUse. Nil: no check.
	NodeAlive func(ctx context.Context, name string) (alive bool, heartbeat time.Time, err error)
	// NodeRemoved, when set, tells whether node name was removed from the
	// cluster; /v1/renew then refuses it with CodeNodeRemoved. Nil: no check.
	NodeRemoved func(ctx context.Context, name string) (bool, error)
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
	// OnRequest, when set, is called after each request with its path and
	// "" when answered, else the refusal's code (observe.go; metrics).
	OnRequest func(path, reason string)
}

// Server is the join endpoint. NewServer starts nothing; Serve blocks.
type Server struct {
	cfg    ServerConfig
	caDER  []byte
	limit  *limiter
	nonces *nonces
	log    *slog.Logger
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Tokens == nil || cfg.Signer == nil || cfg.Cluster == nil {
		return nil, errors.New("join: server needs Tokens, Signer and Cluster")
	}
	block, _ := pem.Decode(cfg.CAPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("join: CAPEM holds no certificate")
	}
	if cfg.RateLimit.Burst <= 0 || cfg.RateLimit.Every <= 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, caDER: block.Bytes, limit: newLimiter(cfg.RateLimit), nonces: newNonces(), log: cfg.Log}, nil
}

// Handler serves the paths: discovery, join and renew (renew.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathDiscovery, s.limited(s.discovery))
	mux.HandleFunc("POST "+PathJoin, s.limited(s.join))
	mux.HandleFunc("POST "+PathRenew, s.limited(s.renew))
	if s.cfg.OnRequest != nil {
		return observed(mux, s.cfg.OnRequest)
	}
	return mux
}

// Serve serves TLS with cert on ln until ctx ends, then shuts down.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert tls.Certificate) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}, // checked by /v1/renew (clientNode)
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("join: serve: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	}
}

// limited refuses a source over its rate with 429 and Retry-After.
func (s *Server) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		if ok, wait := s.limit.allow(ip, s.cfg.Now()); !ok {
			secs := int((wait + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			s.log.Warn("join endpoint: rate limited", "source", ip, "path", r.URL.Path)
			problem(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf("too many join attempts from %s; retry in %ds", ip, secs))
			return
		}
		h(w, r)
	}
}

// discovery answers with the CA and the proof that this server knows the
// token's secret.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	tok, ok := s.token(w, r.Context(), id, r.RemoteAddr)
	if !ok {
		return
	}
	writeJSON(w, Discovery{CAPEM: string(s.cfg.CAPEM), Proof: mac(tok.Spec.Secret, s.caDER)})
}

// join checks a join request and signs its certificate.
func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		problem(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("body unreadable or larger than %d bytes", maxBody))
		return
	}
	req, err := DecodeRequest(body)
	if err != nil {
		problem(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	source := r.RemoteAddr
	tok, ok := s.token(w, ctx, req.TokenID, source)
	if !ok {
		return
	}
	now := s.cfg.Now()
	if !macEqual(tok.Spec.Secret, body, r.Header.Get(ProofHeader)) {
		s.log.Warn("join refused: proof does not match the token", "token", req.TokenID, "node", req.Name, "source", source)
		problem(w, http.StatusForbidden, CodeBadProof, fmt.Sprintf("the request's proof does not match token %s (wrong secret)", req.TokenID))
		return
	}
	if d := now.Sub(req.Time); d > MaxSkew || d < -MaxSkew {
		problem(w, http.StatusBadRequest, CodeClockSkew, fmt.Sprintf("request time %s is %s from the endpoint's clock; at most %s is accepted: fix the clock", req.Time.UTC().Format(time.RFC3339), d.Round(time.Second), MaxSkew))
		return
	}
	if s.replayed(ctx, w, req, source, now) {
		return
	}
	if err := token.Check(tok, now, req.Roles); err != nil {
		s.refuseToken(w, err, req.TokenID, source)
		return
	}
	if s.nameTaken(ctx, w, req, source) {
		return
	}
	certPEM, err := s.cfg.Signer.SignCSR([]byte(req.CSRPEM), pki.Request{CommonName: pki.NodeIdentity(req.Name), Usage: pki.UsageClient}, now)
	if err != nil {
		problem(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("certificate request: %v", err))
		return
	}
	ensure := s.cfg.EnsureIdentityRoles
	if ensure == nil && s.cfg.EnsureIdentity != nil {
		ensure = func(ctx context.Context, name string, _ []api.Role) error { return s.cfg.EnsureIdentity(ctx, name) }
	}
	if ensure != nil {
		if err := ensure(ctx, req.Name, req.Roles); err != nil {
			s.internal(w, "ensure the node's etcd identity", err)
			return
		}
	}
	cl, err := s.cfg.Cluster(ctx)
	if err != nil {
		s.internal(w, "read the cluster's endpoints", err)
		return
	}
	resp := Response{CertPEM: string(certPEM), CAPEM: string(s.cfg.CAPEM), Endpoints: cl.Endpoints, GossipSecret: cl.GossipSecret, GossipGeneration: cl.GossipGeneration}
	if slices.Contains(req.Roles, api.RoleControlPlane) {
		if s.cfg.ControlPlane == nil {
			s.internal(w, "control-plane bundle", errors.New("this endpoint cannot hand out the control-plane bundle"))
			return
		}
		if resp.ControlPlane, err = s.cfg.ControlPlane(ctx); err != nil {
			s.internal(w, "control-plane bundle", err)
			return
		}
	}
	if err := s.cfg.Tokens.Used(ctx, req.TokenID, req.Name, now); err != nil {
		s.log.Warn("recording the token's use failed", "token", req.TokenID, "err", err)
	}
	s.log.Info("machine joined", "node", req.Name, "token", req.TokenID, "roles", req.Roles, "source", source)
	writeJSON(w, resp)
}

// token reads token id and checks that it is usable (roles are checked
// later, once the request's proof is), or answers with the refusal.
func (s *Server) token(w http.ResponseWriter, ctx context.Context, id, source string) (*api.Token, bool) {
	if !token.ValidID(id) {
		problem(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("token id: %d characters of [a-z0-9] are accepted", token.IDLen))
		return nil, false
	}
	tok, err := s.cfg.Tokens.Get(ctx, id)
	if err == nil {
		err = token.Check(tok, s.cfg.Now(), nil)
	}
	if err != nil {
		s.refuseToken(w, err, id, source)
		return nil, false
	}
	return tok, true
}

// refuseToken answers a token.Check (or Tokens.Get) error.
func (s *Server) refuseToken(w http.ResponseWriter, err error, id, source string) {
	code, sentinel := "", error(nil)
	switch {
	case errors.Is(err, token.ErrUnknown):
		code, sentinel = CodeUnknown, token.ErrUnknown
	case errors.Is(err, token.ErrExpired):
		code, sentinel = CodeExpired, token.ErrExpired
	case errors.Is(err, token.ErrRevoked):
		code, sentinel = CodeRevoked, token.ErrRevoked
	case errors.Is(err, token.ErrRoleNotAllowed):
		code, sentinel = CodeRoleNotAllowed, token.ErrRoleNotAllowed
	default:
		s.internal(w, "read the token", err)
		return
	}
	s.log.Info("join refused", "token", id, "reason", code, "source", source)
	// The client names the reason itself (codeErr): send the details only.
	msg := strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	if code == CodeUnknown {
		msg = fmt.Sprintf("no token %s in this cluster", id)
	}
	problem(w, http.StatusForbidden, code, msg)
}

func (s *Server) internal(w http.ResponseWriter, what string, err error) {
	s.log.Error("join endpoint failed", "op", what, "err", err)
	problem(w, http.StatusInternalServerError, CodeInternal, "the join endpoint could not "+what+"; see its log")
}

// nameRE is a node name: a DNS label.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// DecodeRequest parses and checks a join request body (outside input:
// unknown fields, bad names and roles are refused).
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf("body: %v", err)
	}
	if dec.More() {
		return Request{}, errors.New("body: more than one JSON value")
	}
	if !token.ValidID(req.TokenID) {
		return Request{}, fmt.Errorf("tokenID: %d characters of [a-z0-9] are accepted", token.IDLen)
	}
	if !nameRE.MatchString(req.Name) {
		return Request{}, fmt.Errorf("name %q: a DNS label is accepted (1 to 63 of [a-z0-9-])", truncated(req.Name))
	}
	if len(req.Roles) == 0 {
		return Request{}, fmt.Errorf("roles: at least one of %v", token.AllRoles)
	}
	for _, r := range req.Roles {
		if !slices.Contains(token.AllRoles, r) {
			return Request{}, fmt.Errorf("roles: %q is not accepted; use %v", truncated(string(r)), token.AllRoles)
		}
	}
	if len(req.Nonce) < 16 || len(req.Nonce) > 128 {
		return Request{}, errors.New("nonce: 16 to 128 characters are accepted")
	}
	if block, _ := pem.Decode([]byte(req.CSRPEM)); block == nil || block.Type != "CERTIFICATE REQUEST" {
		return Request{}, errors.New("csrPEM: a PEM CERTIFICATE REQUEST is accepted")
	}
	if _, err := pki.ParseCSR([]byte(req.CSRPEM)); err != nil { // its signature too
		return Request{}, fmt.Errorf("csrPEM: %v", err)
	}
	return req, nil
}

func truncated(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func problem(w http.ResponseWriter, status int, code, msg string) {
	if rec, ok := w.(*codeRecorder); ok {
		rec.code = code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// Errors of the server, each answered with its HTTP status.
var (
	// ErrNotHeld: a call that needs the host held for the operation
	// (restore, serve, rejoin) came before its stop.
	ErrNotHeld = errors.New("recovery: the host is not held for this operation")
	// ErrHeldByOther: another operation holds the host.
	ErrHeldByOther = errors.New("recovery: another operation holds the host")
	// ErrBadRequest: a request that names no operation, or a malformed body.
	ErrBadRequest = errors.New("recovery: bad request")
)

// Server is the recovery API of one host. Its calls are serialized: one
// host runs one step at a time.
type Server struct {
	host  Host
	mu    sync.Mutex
	fleet *restore.LocalFleet
	log   *slog.Logger
}

// New returns the server of h; it starts nothing (serve Handler).
func New(h Host) *Server {
	if h.Now == nil {
		h.Now = time.Now
	}
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "recovery", "node", h.Name)
	lm := &restore.LocalMember{Name: h.Name, DataDir: h.DataDir, PeerURL: h.PeerURL, ClientURL: h.ClientURL, Runtime: h.Runtime, TLS: h.MemberTLS}
	return &Server{host: h, log: log, fleet: &restore.LocalFleet{Members: []*restore.LocalMember{lm}, ClientTLS: h.ClientTLS, Log: log, Now: h.Now}}
}

// Handler serves the API (restore.Path*), refusing every caller but the
// operator (pki.RootIdentity) with 403.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+restore.PathSurvey, func(w http.ResponseWriter, r *http.Request) { reply(w, s.survey(r.Context()), nil) })
	mux.HandleFunc("GET "+restore.PathPeers, func(w http.ResponseWriter, r *http.Request) { reply(w, s.peers(), nil) })
	mux.HandleFunc("POST "+restore.PathStop, call(s, s.stop))
	mux.HandleFunc("PUT "+restore.PathSnapshot, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		reply(w, struct{}{}, s.receive(r))
	})
	mux.HandleFunc("POST "+restore.PathRestore, call(s, s.restore))
	mux.HandleFunc("POST "+restore.PathServe, call(s, s.serve))
	mux.HandleFunc("POST "+restore.PathRejoin, call(s, s.rejoin))
	mux.HandleFunc("POST "+restore.PathRelease, call(s, s.release))
	return s.authorize(mux)
}

// authorize lets only the operator's client certificate through; the TLS
// layer has already checked it against the fleet CA.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			writeError(w, http.StatusForbidden, errors.New("recovery: a client certificate of the fleet CA is required"))
			return
		}
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != pki.RootIdentity {
			s.log.Warn("recovery call refused", "cn", cn, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, fmt.Errorf("recovery: client certificate %q may not call the recovery API (accepted: %q, the operator's)", cn, pki.RootIdentity))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// call decodes a JSON body of type T, runs do under the lock and answers.
func call[T any, R any](s *Server, do func(context.Context, T) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req T
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: body: %w", ErrBadRequest, err))
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		resp, err := do(r.Context(), req)
		reply(w, resp, err)
	}
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrBadRequest):
			code = http.StatusBadRequest
		case errors.Is(err, ErrNotHeld), errors.Is(err, ErrHeldByOther), errors.Is(err, restore.ErrStillServing):
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(restore.APIError{Error: err.Error()})
}

func (s *Server) peers() []restore.AgentPeer {
	if s.host.Peers == nil {
		return nil
	}
	return s.host.Peers()
}

// needOp refuses a request that names no operation.
func needOp(op string) error {
	if op == "" {
		return fmt.Errorf("%w: field op is empty, want the operation's ID (restore-..., recover-...)", ErrBadRequest)
	}
	if !validOp.MatchString(op) {
		return fmt.Errorf("%w: field op %q is not an operation ID (want lower-case letters, digits, '-' and '.', as restore-20060102t150405)", ErrBadRequest, op)
	}
	return nil
}

// heldFor refuses unless op holds the host.
func (s *Server) heldFor(op string) error {
	if err := needOp(op); err != nil {
		return err
	}
	cur, err := Held(s.host.DataDir)
	if err != nil {
		return err
	}
	switch cur {
	case op:
		return nil
	case "":
		return fmt.Errorf("%w: %s is not held; stop it for %s first", ErrNotHeld, s.host.Name, op)
	default:
		return fmt.Errorf("%w: %s holds %s, not %s", ErrHeldByOther, cur, s.host.Name, op)
	}
}

// stop holds the host for req.Op, stops the agent and its member and
// fences the data dir when asked.
func (s *Server) stop(ctx context.Context, req restore.StopRequest) (struct{}, error) {
	if err := needOp(req.Op); err != nil {
		return struct{}{}, err
	}
	cur, err := Held(s.host.DataDir)
	if err != nil {
		return struct{}{}, err
	}
	if cur != "" && cur != req.Op {
		return struct{}{}, fmt.Errorf("%w: %s holds %s, not %s: finish it first", ErrHeldByOther, cur, s.host.Name, req.Op)
	}
	if cur == "" {
		// The hold first: an agent restarted from here on does not take
		// the host back.
		if err := writeHold(s.host.DataDir, req.Op, s.host.Now()); err != nil {
			return struct{}{}, err
		}
		s.log.Warn("host held for a recovery operation: stopping the agent", "op", req.Op)
	}
	if s.host.StopAgent != nil {
		if err := s.host.StopAgent(ctx); err != nil {
			return struct{}{}, fmt.Errorf("recovery: stop the agent: %w", err)
		}
	}
	return struct{}{}, s.fleet.Stop(ctx, s.host.Name, req.Fence)
}

func (s *Server) restore(ctx context.Context, req restore.RestoreRequest) (struct{}, error) {
	if err := s.heldFor(req.Op); err != nil {
		return struct{}{}, err
	}
	path, err := s.checkedSnapshot(req.Op, req.SHA256)
	if err != nil {
		return struct{}{}, err
	}
	s.fleet.ClusterToken = req.ClusterToken
	if err := s.fleet.Restore(ctx, s.host.Name, path, req.BumpRevision); err != nil {
		return struct{}{}, err
	}
	s.log.Info("snapshot restored as a new one-member cluster", "op", req.Op, "sha256", req.SHA256)
	return struct{}{}, nil
}

func (s *Server) serve(ctx context.Context, req restore.ServeRequest) (restore.ServeResponse, error) {
	if err := s.heldFor(req.Op); err != nil {
		return restore.ServeResponse{}, err
	}
	if req.Force != (req.Hold != nil) {
		return restore.ServeResponse{}, fmt.Errorf("%w: field force is %v and field hold is %v: a forced start needs its recovery's hold (its journal and prefix), and only it", ErrBadRequest, req.Force, req.Hold != nil)
	}
	if req.Hold != nil {
		if err := req.Hold.Check(req.Op); err != nil {
			return restore.ServeResponse{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
	s.fleet.ClusterToken = req.ClusterToken
	if req.Force && s.host.ForceRuntime != nil {
		s.fleet.Members[0].Runtime = s.host.ForceRuntime
	}
	id, err := s.fleet.Serve(ctx, s.host.Name, req.Hold)
	return restore.ServeResponse{ClusterID: id}, err
}

func (s *Server) rejoin(ctx context.Context, req restore.RejoinRequest) (struct{}, error) {
	if err := s.heldFor(req.Op); err != nil {
		return struct{}{}, err
	}
	eps := slices.DeleteFunc(slices.Clone(req.Endpoints), func(e string) bool { return e == s.host.ClientURL })
	if len(eps) == 0 {
		return struct{}{}, fmt.Errorf("%w: field endpoints %v names no member but this host's: want the client URLs of the cluster that serves", ErrBadRequest, req.Endpoints)
	}
	s.fleet.ClusterToken, s.fleet.Peers = req.ClusterToken, eps
	return struct{}{}, s.fleet.Rejoin(ctx, s.host.Name)
}

// release stops the member the recovery served and hands the host back.
func (s *Server) release(ctx context.Context, req restore.ReleaseRequest) (struct{}, error) {
	if err := needOp(req.Op); err != nil {
		return struct{}{}, err
	}
	cur, err := Held(s.host.DataDir)
	if err != nil || cur == "" {
		return struct{}{}, err // released already
	}
	if cur != req.Op {
		return struct{}{}, fmt.Errorf("%w: %s holds %s, not %s", ErrHeldByOther, cur, s.host.Name, req.Op)
	}
	for _, rt := range []member.Runtime{s.fleet.Members[0].Runtime, s.host.Runtime} {
		if err := rt.Stop(ctx); err != nil {
			return struct{}{}, fmt.Errorf("recovery: stop the member: %w", err)
		}
	}
	s.fleet.Members[0].Runtime = s.host.Runtime
	s.removeSnapshots()
	if req.Unfence {
		if err := s.fleet.Unfence(req.Op); err != nil {
			return struct{}{}, err
		}
	}
	if err := os.Remove(HoldFile(s.host.DataDir)); err != nil {
		return struct{}{}, fmt.Errorf("recovery: remove the hold: %w", err)
	}
	s.log.Info("host handed back to the agent", "op", req.Op)
	if s.host.Release != nil {
		s.host.Release()
	}
	return struct{}{}, nil
}

// Package member runs this node's local etcd member, embedded in the process
// or as an etcd binary in a child process, behind one Runtime interface.
//
// Every Runtime goes through the same life cycle, and can go round it again:
//
//	       Start(ctx, cfg)                 serves its client URL
//	idle ------------------> starting ---------------------------> running
//	 ^                          |                                     |
//	 |   start failed or ctx    |           Stop, crash or removal    |
//	 |   ended: error returned, |                                     |
//	 |   nothing left running   v                                     v
//	 +------------------------ exited <-------------------------------+
//	      Start again               Done() closed, Err() says why
//
// Start on a running member returns ErrRunning; Stop on an idle or exited
// member returns nil at once.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Cluster states accepted in Config.ClusterState.
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// ErrRemoved is the exit reason of a member that the cluster removed; its data
// dir must be wiped before it may run again.
var ErrRemoved = errors.New("member: removed from the cluster")

// ErrRunning is returned by Start when the member is already running.
var ErrRunning = errors.New("member: already running")

// removedText is what etcd logs (and wraps in its server error) when this
// member learns that it was removed, both from an applied ConfChange and from
// a peer's "410 Gone".
const removedText = "the member has been permanently removed from the cluster"

// notMemberText is what etcd panics with when a client call (Status's
// IsLearner) reaches a member that has applied its own removal but not yet
// stopped: an etcd child that exits with it was removed, whether or not it
// got to log removedText first.
const notMemberText = "failed to find local ID in cluster members"

// saysRemoved reports whether a line of etcd's log tells that this member
// was removed.
func saysRemoved(line string) bool {
	return strings.Contains(line, removedText) || strings.Contains(line, notMemberText)
}

// Config describes the one local member to run.
type Config struct {
	Name           string
	DataDir        string
	PeerURL        string // listened on and advertised
	ClientURL      string // listened on and advertised
	InitialCluster string // "name=peerURL,name2=peerURL2"; empty means "Name=PeerURL"
	ClusterState   string // "new" or "existing"; empty means "new"
	ClusterToken   string // empty means etcd's default
	// ForceNewCluster starts the member from its data as the one member of
	// a new cluster (etcd's --force-new-cluster): quorum-loss recovery only.
	ForceNewCluster bool
	// QuotaBackendBytes is the member's database quota (etcd's
	// --quota-backend-bytes), past which etcd raises NOSPACE; zero is
	// etcd's default (2 GiB).
	QuotaBackendBytes int64
	// TLS is the member's certificates; with it both URLs are https. nil
	// runs plaintext http (tests that predate TLS only).
	TLS    *TLS
	Logger *slog.Logger
}

// Runtime runs one local etcd member.
type Runtime interface {
	// Start starts the member and returns once it serves its client URL (a
	// learner too), or returns an error when it fails to start or ctx ends
	// first; then nothing is left running. A Runtime may be started again
	// once it has exited.
	Start(ctx context.Context, cfg Config) error
	// Stop stops the member gracefully; it is idempotent and safe before Start.
	Stop(ctx context.Context) error
	// Done is closed when the member has exited, for any reason (Stop, crash,
	// removal). It is the channel of the latest Start; before the first Start
	// it is already closed.
	Done() <-chan struct{}
	// Err says why the member exited: nil after Stop (and before any Start or
	// exit), ErrRemoved when the cluster removed this member, another error
	// otherwise.
	Err() error
}

// withDefaults checks cfg and fills in its optional fields. Errors name the
// field, the value and what would be accepted.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		return cfg, errors.New("member: Config.Name is empty, want the member's name")
	}
	if cfg.DataDir == "" {
		return cfg, errors.New("member: Config.DataDir is empty, want a directory path")
	}
	pu, err := parseListenURL("PeerURL", cfg.PeerURL)
	if err != nil {
		return cfg, err
	}
	cu, err := parseListenURL("ClientURL", cfg.ClientURL)
	if err != nil {
		return cfg, err
	}
	if err := checkScheme("PeerURL", pu, cfg.TLS); err != nil {
		return cfg, err
	}
	if err := checkScheme("ClientURL", cu, cfg.TLS); err != nil {
		return cfg, err
	}
	if cfg.TLS != nil {
		if err := cfg.TLS.validate(); err != nil {
			return cfg, err
		}
	}
	if cfg.QuotaBackendBytes < 0 {
		return cfg, fmt.Errorf("member: Config.QuotaBackendBytes is %d, want 0 (etcd's default) or a positive byte count", cfg.QuotaBackendBytes)
	}
	switch cfg.ClusterState {
	case "":
		cfg.ClusterState = StateNew
	case StateNew, StateExisting:
	default:
		return cfg, fmt.Errorf("member: Config.ClusterState is %q, want %q or %q", cfg.ClusterState, StateNew, StateExisting)
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	if !strings.Contains(cfg.InitialCluster, cfg.Name+"=") {
		return cfg, fmt.Errorf("member: Config.InitialCluster %q has no entry for Config.Name %q, want \"%s=%s,...\"",
			cfg.InitialCluster, cfg.Name, cfg.Name, cfg.PeerURL)
	}
	if err := checkFence(cfg.DataDir); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("member", cfg.Name)
	return cfg, nil
}

func parseListenURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
		return nil, fmt.Errorf("member: Config.%s is %q, want an http(s) URL with a port, like http://127.0.0.1:2380", field, raw)
	}
	return u, nil
}

// checkFree binds each URL's host:port for a moment, so that a busy port is
// reported with the URL that needs it rather than deep inside etcd's logs.
func checkFree(urls ...string) error {
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("member: parse %q: %w", raw, err)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			if p, perr := strconv.Atoi(u.Port()); perr == nil {
				if held := portHolders(p); held != "" {
					return fmt.Errorf("member: cannot listen on %s (port %d: %s): %w", raw, p, held, err)
				}
			}
			return fmt.Errorf("member: cannot listen on %s: %w", raw, err)
		}
		l.Close()
	}
	return nil
}

package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/homystack/nico/pkg/member"
)

// Sleeper is a Service that runs until it is stopped or crashed.
type Sleeper struct {
	mu   sync.Mutex
	done chan struct{}
	err  error
	run  bool
}

// NewSleeper returns a stopped Sleeper.
func NewSleeper() *Sleeper {
	d := make(chan struct{})
	close(d)
	return &Sleeper{done: d}
}

// Start runs the sleeper unless ctx has ended.
func (s *Sleeper) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.run {
		s.run, s.err, s.done = true, nil, make(chan struct{})
	}
	return nil
}

// Stop ends the run with a nil Err.
func (s *Sleeper) Stop(context.Context) error { s.exit(nil); return nil }

func (s *Sleeper) exit(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run {
		s.run, s.err = false, err
		close(s.done)
	}
}

// Done is closed when the run has ended.
func (s *Sleeper) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Err says why the run ended.
func (s *Sleeper) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Etcd is a Service like nixpkgs' etcd.service: it reads the member's
// settings from the EnvironmentFile the Systemd runtime wrote and runs a
// real etcd member (member.Embedded) with them, listening where it
// advertises. Its ExitLines give the unit's journal etcd's removal line.
type Etcd struct {
	envFile string
	member  *member.Embedded
	log     *slog.Logger
}

// NewEtcd returns an Etcd service reading envFile.
func NewEtcd(envFile string, log *slog.Logger, opts ...member.Option) *Etcd {
	return &Etcd{envFile: envFile, member: member.NewEmbedded(opts...), log: log}
}

// Start reads the environment file and starts the member.
func (e *Etcd) Start(ctx context.Context) error {
	env, err := member.ReadEnvironmentFile(e.envFile)
	if err != nil {
		return err
	}
	tlsFiles, err := member.TLSFromEnvironment(env)
	if err != nil {
		return err
	}
	cfg := member.Config{
		TLS:            tlsFiles,
		Name:           env["ETCD_NAME"],
		DataDir:        env["ETCD_DATA_DIR"],
		PeerURL:        env["ETCD_INITIAL_ADVERTISE_PEER_URLS"],
		ClientURL:      env["ETCD_ADVERTISE_CLIENT_URLS"],
		InitialCluster: env["ETCD_INITIAL_CLUSTER"],
		ClusterState:   env["ETCD_INITIAL_CLUSTER_STATE"],
		ClusterToken:   env["ETCD_INITIAL_CLUSTER_TOKEN"],
		Logger:         e.log,
	}
	if q := env["ETCD_QUOTA_BACKEND_BYTES"]; q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			return fmt.Errorf("systemdtest: ETCD_QUOTA_BACKEND_BYTES=%q, want a byte count: %w", q, err)
		}
		cfg.QuotaBackendBytes = n
	}
	return e.member.Start(ctx, cfg)
}

// ExitLines is what etcd logs when it exits with err: its removal line
// when the member was removed.
func (e *Etcd) ExitLines(err error) []string {
	if errors.Is(err, member.ErrRemoved) {
		return []string{fmt.Sprintf(`{"level":"warn","msg":"%s"}`, RemovedLine)}
	}
	return nil
}

// RemovedLine is the text etcd logs when this member was removed.
const RemovedLine = "the member has been permanently removed from the cluster"

// Stop stops the member.
func (e *Etcd) Stop(ctx context.Context) error { return e.member.Stop(ctx) }

// Done is closed when the member has exited.
func (e *Etcd) Done() <-chan struct{} { return e.member.Done() }

// Err says why the member exited.
func (e *Etcd) Err() error { return e.member.Err() }

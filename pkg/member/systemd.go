package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultUnit is the unit of nixpkgs' services.etcd.
const DefaultUnit = "etcd.service"

// Systemd runs the local member as a systemd service (nixpkgs'
// etcd.service, configured by nico's NixOS module). Start writes the
// EnvironmentFile the unit reads (see Environment) and starts or restarts
// the unit through a UnitManager; the member is up once its client URL
// answers Status. A watcher follows the unit's state until it exits.
//
//	Start: write env file -> StartUnit (RestartUnit when the unit already
//	       runs, so that it reads the new file) -> poll Status on ClientURL
//	       -> watch the unit; on a first start into an existing cluster, a
//	       lost publish (lost_publish.go) -> KillUnit SIGKILL -> StartUnit,
//	       once (systemd_publish.go)
//	Stop:  StopUnit -> (a Start under way ends) -> Done closed, Err nil
//	       (or, for a Start under way, "stopped before serving")
//	unit exits by itself -> Done closed; Err is ErrRemoved when etcd's
//	       journal since the start has its "permanently removed" line,
//	       another error naming the unit state otherwise
//
// Removal is detected from etcd's own journal line (the same line the Exec
// runtime reads on the child's stderr) rather than from the member list:
// the list needs the other members' client URLs, which the runtime does
// not have after a restart, and the line is written by the member itself
// before it exits.
type Systemd struct {
	units   UnitManager
	journal Journal
	unit    string
	envFile string
	tlsEnv  bool          // SystemdConfig.TLSInEnvironment
	binary  string        // SystemdConfig.Binary
	every   time.Duration // readiness poll

	mu      sync.Mutex
	run     *systemdRun
	version string // what the unit's etcd reported at its last start
}

var _ Runtime = (*Systemd)(nil)

// SystemdConfig configures NewSystemd.
type SystemdConfig struct {
	Units           UnitManager
	Journal         Journal       // nil: Journalctl{}
	Unit            string        // empty: DefaultUnit
	EnvironmentFile string        // required: the unit's EnvironmentFile=
	PollInterval    time.Duration // readiness polls; zero: 200ms
	// TLSInEnvironment writes Config.TLS's certificate files and cert-auth
	// switches into the environment file (ETCD_CERT_FILE, ...), where they
	// override the unit's. Leave it false when the unit names its own TLS
	// files, as nico's NixOS module does: it hands pki.dir's files to etcd
	// as systemd credentials, since the etcd user cannot read pki.dir. The
	// readiness client uses Config.TLS either way.
	TLSInEnvironment bool
	// Binary is the etcd the unit runs as the switched system names it
	// (/run/current-system/sw/bin/etcd on NixOS): UseVersion asks it its
	// version, so that a generation that brought another etcd package can
	// be restarted into it. Empty: UseVersion accepts only the running
	// version.
	Binary string
}

// NewSystemd returns an idle Systemd runtime; it starts nothing.
func NewSystemd(c SystemdConfig) (*Systemd, error) {
	if c.Units == nil {
		return nil, errors.New("member: SystemdConfig.Units is nil, want a UnitManager such as DialSystemd's")
	}
	if c.EnvironmentFile == "" || c.EnvironmentFile[0] != '/' {
		return nil, fmt.Errorf("member: SystemdConfig.EnvironmentFile is %q, want an absolute path", c.EnvironmentFile)
	}
	s := &Systemd{units: c.Units, journal: c.Journal, unit: c.Unit, envFile: c.EnvironmentFile, tlsEnv: c.TLSInEnvironment, binary: c.Binary, every: c.PollInterval}
	if s.journal == nil {
		s.journal = Journalctl{}
	}
	if s.unit == "" {
		s.unit = DefaultUnit
	}
	if s.every <= 0 {
		s.every = 200 * time.Millisecond
	}
	return s, nil
}

// systemdRun is one Start: its exit is recorded once.
type systemdRun struct {
	name     string
	since    time.Time
	done     chan struct{}
	once     sync.Once
	err      error
	stopping chan struct{} // closed by Stop before it stops the unit
	decided  chan struct{} // closed when Start returns
	stopOnce sync.Once
	cancel   context.CancelFunc // ends the watcher; guarded by Systemd.mu
}

func (r *systemdRun) finish(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

func (r *systemdRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Start writes the environment file, starts etcd's unit and returns once
// the member serves its client URL. When it fails, the unit is stopped.
func (s *Systemd) Start(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.run != nil && !s.run.exited() {
		s.mu.Unlock()
		return fmt.Errorf("member: start %s: %w", cfg.Name, ErrRunning)
	}
	run := &systemdRun{name: cfg.Name, since: time.Now(), done: make(chan struct{}), stopping: make(chan struct{}), decided: make(chan struct{})}
	s.run = run
	s.mu.Unlock()
	defer close(run.decided)

	if err := s.start(ctx, cfg, run); err != nil {
		err = fmt.Errorf("member: start %s: %w", cfg.Name, err)
		run.finish(err)
		return err
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	run.cancel = cancel
	s.mu.Unlock()
	states, err := s.units.WatchUnit(wctx, s.unit)
	if err != nil {
		cancel()
		s.stopUnit(cfg.Logger, false)
		run.finish(fmt.Errorf("member: start %s: watch %s: %w", cfg.Name, s.unit, err))
		return run.err
	}
	go s.watch(run, states, cfg.Logger)
	return nil
}

func (s *Systemd) start(ctx context.Context, cfg Config, run *systemdRun) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := s.units.UnitState(ctx, s.unit)
	if err != nil {
		return err
	}
	if !st.Running() {
		// The unit listens on this host: report a busy port by its URL.
		if err := checkFree(cfg.PeerURL, cfg.ClientURL); err != nil {
			return err
		}
	}
	envCfg := cfg
	if !s.tlsEnv {
		envCfg.TLS = nil // the unit names its own files
	}
	if err := WriteEnvironmentFile(s.envFile, envCfg); err != nil {
		return err
	}
	cfg.Logger.Info("starting etcd unit", "unit", s.unit, "state", cfg.ClusterState, "was", st.String())
	restart := restartable(cfg)
	err = s.startServing(ctx, cfg, run, st.Running(), restart)
	if restart && errors.Is(err, errLostPublish) {
		cfg.Logger.Info("etcd member restarts once: "+errLostPublish.Error(), "member", cfg.Name, "unit", s.unit)
		err = s.restartLost(ctx, cfg, run)
	}
	if err == nil && isClosed(run.stopping) {
		// Stop came while the unit started: its stop job may have run
		// before this start's.
		err = fmt.Errorf("stopped before serving %s", cfg.ClientURL)
	}
	if err != nil {
		s.stopUnit(cfg.Logger, ctx.Err() != nil)
		if s.removedSince(run.since, cfg.Logger) {
			return fmt.Errorf("%w: %w", ErrRemoved, err)
		}
		return err
	}
	return nil
}

// waitServing polls Status on the member's client URL until it answers,
// the unit exits, or ctx ends.
func (s *Systemd) waitServing(ctx context.Context, cfg Config) error {
	tlsCfg, err := cfg.clientTLS()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{cfg.ClientURL}, DialTimeout: 2 * time.Second, TLS: tlsCfg, Logger: zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.ClientURL, err)
	}
	defer cli.Close()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Status(sctx, cfg.ClientURL)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.version = resp.Version
			s.mu.Unlock()
			return nil
		}
		if st, serr := s.units.UnitState(ctx, s.unit); serr == nil && st.Exited() {
			return fmt.Errorf("unit %s is %s before serving %s: %w", s.unit, st, cfg.ClientURL, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to serve: %w", cfg.ClientURL, ctx.Err())
		case <-t.C:
		}
	}
}

// watch records the run's exit when the unit stops.
func (s *Systemd) watch(run *systemdRun, states <-chan UnitState, log *slog.Logger) {
	s.mu.Lock()
	cancel := run.cancel
	s.mu.Unlock()
	defer cancel()
	for st := range states {
		if !st.Exited() {
			continue
		}
		select {
		case <-run.stopping:
			run.finish(nil)
			return
		default:
		}
		err := fmt.Errorf("member: %s: unit %s exited: %s", run.name, s.unit, st)
		if s.removedSince(run.since, log) {
			err = fmt.Errorf("%w: unit %s exited: %s", ErrRemoved, s.unit, st)
		}
		log.Warn("etcd unit exited", "unit", s.unit, "state", st.String(), "err", err)
		run.finish(err)
		return
	}
}

// removedSince reports whether etcd logged its removal since t.
func (s *Systemd) removedSince(t time.Time, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines, err := s.journal.Lines(ctx, s.unit, t)
	if err != nil {
		log.Warn("cannot read etcd's journal; an exit is not taken for a removal", "unit", s.unit, "err", err)
		return false
	}
	for _, l := range lines {
		if saysRemoved(l) {
			return true
		}
	}
	return false
}

// stopUnitWait bounds the wait for the stop job after a failed start;
// stopUnitQueued, after a start canceled because the agent is stopping.
const (
	stopUnitWait   = time.Minute
	stopUnitQueued = 2 * time.Second
)

// stopUnit stops the unit after a failed start, whatever ctx the start had.
// A start canceled by the agent's own stop (canceled) only queues the stop
// job: systemd orders it after the agent's stop job (nico-agent.service is
// After=etcd.service, so etcd stops after the agent), and waiting for it
// would hold the agent's stop, and a `systemctl restart nico-agent`, for
// the whole wait. systemd runs the queued job once the agent has exited.
func (s *Systemd) stopUnit(log *slog.Logger, canceled bool) {
	wait := stopUnitWait
	if canceled {
		wait = stopUnitQueued
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.units.StopUnit(ctx, s.unit); err != nil {
		log.Warn("stop etcd unit after a failed start", "unit", s.unit, "err", err)
	}
}

// Stop stops the unit and waits for systemd's stop job, and for a Start
// under way to end (Err then says the start was stopped). It is
// idempotent.
func (s *Systemd) Stop(ctx context.Context) error {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run == nil || run.exited() {
		return nil
	}
	run.stopOnce.Do(func() { close(run.stopping) })
	if err := s.units.StopUnit(ctx, s.unit); err != nil {
		return fmt.Errorf("member: stop %s: %w", run.name, err)
	}
	// A Start still under way stops the unit again when its own start
	// job (a restart after a lost publish) came after the StopUnit above.
	select {
	case <-run.decided:
	case <-ctx.Done():
		return fmt.Errorf("member: stop %s: waiting for its start to end: %w", run.name, ctx.Err())
	}
	run.finish(nil) // the unit is inactive: the job completed
	s.mu.Lock()
	cancel := run.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}

// Done is closed when the latest run has ended.
func (s *Systemd) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return closedChan
	}
	return s.run.done
}

// Err says why the latest run ended; nil while it runs.
func (s *Systemd) Err() error {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run == nil || !run.exited() {
		return nil
	}
	return run.err
}

package member

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Embedded runs the member inside this process with server/v3/embed. etcd's
// own log is handed to the Config's logger at warn level and above.
type Embedded struct {
	opts options

	mu  sync.Mutex
	run *embeddedRun // latest run; nil before the first Start
}

var _ Runtime = (*Embedded)(nil)

// embeddedRun is one Start of an Embedded, up to its exit.
type embeddedRun struct {
	stopc    chan struct{} // closed by Stop
	stopOnce sync.Once
	done     chan struct{} // closed after err is set
	err      error
	removed  atomic.Bool // etcd logged that this member was removed
	quiet    atomic.Bool // shutting down: etcd's log goes to debug
	gate     *clientGate // in front of every client call (client_gate.go)

	grpcMu sync.Mutex
	grpcs  []*grpc.Server // etcd's client gRPC servers (ServiceRegister)
}

// stopGRPC stops etcd's client gRPC servers at once, cancelling every
// stream: embed.Etcd.Close first waits for the HTTP server of a shared TLS
// port to drain, which long-lived streams keep busy while the stopping
// etcd server closes its backend under them.
func (r *embeddedRun) stopGRPC() {
	r.grpcMu.Lock()
	defer r.grpcMu.Unlock()
	for _, gs := range r.grpcs {
		stopServer(gs)
	}
}

// restopEvery is how often stopServer closes the streams that arrived
// since grpc.Server.Stop closed the others.
const restopEvery = 100 * time.Millisecond

// stopServer stops gs even while clients keep opening streams. On a TLS
// port etcd serves gRPC behind its HTTP server (grpc.Server.ServeHTTP),
// which takes new streams while Stop, having closed the streams it had,
// waits for them to end; a clientv3 watch re-opens at once on the same
// connection, and Stop would wait for that stream for as long as its
// client lives. Each further Stop closes every stream there is then, until
// none is left and every Stop returns.
func stopServer(gs *grpc.Server) {
	done := make(chan struct{})
	go func() { gs.Stop(); close(done) }()
	tick := time.NewTicker(restopEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			go gs.Stop()
		}
	}
}

// snapshotGapEvery is how often a starting member's indexes are looked at.
const snapshotGapEvery = 250 * time.Millisecond

// snapshotGap tells whether a member that is not ready yet is in the state
// where etcd refuses its own publish ("too many requests"): its committed
// index more than 5 000 past its applied index, which applying a snapshot
// leaves behind (docs/etcd-snapshot-join.md).
func snapshotGap(applied, committed uint64) bool { return applied+5000 < committed }

// NewEmbedded returns an idle embedded runtime; it starts no goroutines.
func NewEmbedded(opts ...Option) *Embedded {
	return &Embedded{opts: newOptions(opts)}
}

// Start starts the member and returns once it has joined its cluster and
// serves clients (etcd's ReadyNotify, which learners reach too).
func (m *Embedded) Start(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	r := &embeddedRun{stopc: make(chan struct{}), done: make(chan struct{}), gate: newClientGate(cfg.Logger)}
	m.mu.Lock()
	if m.run != nil && !isClosed(m.run.done) {
		m.mu.Unlock()
		return fmt.Errorf("member: start %s: %w", cfg.Name, ErrRunning)
	}
	m.run = r
	m.mu.Unlock()
	return r.start(ctx, cfg, m.opts)
}

// Stop closes the member and waits until it has exited or ctx ends. A
// member that does not serve yet stops at once; a serving member's Close
// cannot be cut short: when ctx ends first, Done closes later.
func (m *Embedded) Stop(ctx context.Context) error {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	r.stopOnce.Do(func() { close(r.stopc) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("member: stop: %w", ctx.Err())
	}
}

// Done is closed when the latest run has exited.
func (m *Embedded) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.run == nil {
		return closedChan
	}
	return m.run.done
}

// Err says why the latest run exited; nil while it runs or after Stop.
func (m *Embedded) Err() error {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r == nil || !isClosed(r.done) {
		return nil
	}
	return r.err
}

func (r *embeddedRun) start(ctx context.Context, cfg Config, opts options) error {
	fail := func(err error) error {
		err = fmt.Errorf("member: start %s: %w", cfg.Name, err)
		r.err = err
		close(r.done)
		return err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := checkFree(cfg.PeerURL, cfg.ClientURL); err != nil {
		return fail(err)
	}
	restart := restartable(cfg) && !opts.keepLostPublish
	for {
		ec, err := r.embedConfig(cfg, opts)
		if err != nil {
			return fail(err)
		}
		e, err := embed.StartEtcd(ec)
		if err != nil {
			return fail(fmt.Errorf("peer %s, client %s: %w", cfg.PeerURL, cfg.ClientURL, err))
		}
		r.gate.attach(e.Server)
		cause := r.waitReady(ctx, e, cfg, restart)
		if cause == nil {
			go r.watch(e, cfg)
			return nil
		}
		removed := r.wasRemoved(e)
		r.quiet.Store(true)
		// HardStop ends the pending publish, which Close alone waits out:
		// etcd's serve returns only once the server is ready or stopping.
		e.Server.HardStop()
		e.Close()
		if errors.Is(cause, errLostPublish) {
			cfg.Logger.Info("etcd member restarts once: "+cause.Error(), "member", cfg.Name)
			restart = false
			r.reset(cfg)
			continue
		}
		if removed {
			cause = fmt.Errorf("%w: %w", ErrRemoved, cause)
		}
		return fail(cause)
	}
}

// reset readies r for another etcd server after the first one closed
// before it served.
func (r *embeddedRun) reset(cfg Config) {
	r.quiet.Store(false)
	r.removed.Store(false)
	r.gate = newClientGate(cfg.Logger)
	r.grpcMu.Lock()
	r.grpcs = nil
	r.grpcMu.Unlock()
}

// waitReady waits until e serves clients (nil) or why it will not;
// errLostPublish when restart is set and e lost its own publish.
func (r *embeddedRun) waitReady(ctx context.Context, e *embed.Etcd, cfg Config, restart bool) error {
	stuck := time.NewTicker(snapshotGapEvery)
	defer stuck.Stop()
	var lostc <-chan time.Time
	if restart {
		lost := time.NewTicker(lostPublishEvery)
		defer lost.Stop()
		lostc = lost.C
	}
	var lp lostPublish
	warned := false
	for {
		select {
		case <-lostc:
			if lp.saw(embeddedPublished(e.Server), isClosed(e.Server.ReadyNotify())) {
				return errLostPublish
			}
		case <-stuck.C:
			if !warned && snapshotGap(e.Server.AppliedIndex(), e.Server.CommittedIndex()) {
				warned = true
				cfg.Logger.Warn("etcd member is not ready and its applied index is more than 5000 behind its committed index: etcd refuses its own publish until it applies an entry; after a snapshot, that is the cluster's next write (docs/etcd-snapshot-join.md)",
					"applied-index", e.Server.AppliedIndex(), "committed-index", e.Server.CommittedIndex())
			}
		case <-e.Server.ReadyNotify():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("not serving %s yet: %w", cfg.ClientURL, ctx.Err())
		case <-r.stopc:
			return fmt.Errorf("stopped before serving %s", cfg.ClientURL)
		case <-e.Server.StopNotify():
			return fmt.Errorf("etcd server stopped before serving %s", cfg.ClientURL)
		case lerr := <-e.Err():
			return fmt.Errorf("listener on %s or %s failed: %w", cfg.PeerURL, cfg.ClientURL, lerr)
		}
	}
}

// watch waits until the member stops by itself or Stop asks, closes it and
// records why it exited.
func (r *embeddedRun) watch(e *embed.Etcd, cfg Config) {
	var cause error
	// etcd stops itself when removed (at once when a peer says so, 1 s
	// after it applies its own removal otherwise), closing its backend
	// while its gRPC server still runs; with auth on, a lease keep-alive
	// then reads the closed backend and panics the process (etcd v3.7.3,
	// checkLeaseRenew). Closing as soon as the server starts stopping, or
	// the member is out of its own membership, stops gRPC first.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-r.stopc:
			break wait
		case <-e.Server.StoppingNotify():
			cause = errors.New("etcd server stopped")
			break wait
		case <-r.gate.closed():
			// The member left its own membership, stops, or a client call
			// panicked in it.
			if r.gate.removed.Load() {
				r.removed.Store(true)
			}
			cause = errors.New("stopped serving clients")
			break wait
		case lerr := <-e.Err():
			cause = fmt.Errorf("listener failed: %w", lerr)
			break wait
		case <-tick.C:
			if !e.Server.IsMemberExist(e.Server.MemberID()) {
				r.removed.Store(true)
				cause = errors.New("removed from the cluster")
				break wait
			}
		}
	}
	removed := r.wasRemoved(e)
	r.quiet.Store(true)
	r.stopGRPC()
	e.Close()
	switch {
	case removed:
		r.err = ErrRemoved
	case isClosed(r.stopc):
		r.err = nil
	default:
		r.err = fmt.Errorf("member %s exited: %w", cfg.Name, cause)
	}
	if r.err != nil {
		cfg.Logger.Warn("etcd member exited", "err", r.err)
	}
	close(r.done)
}

// wasRemoved reports whether etcd said it was removed, or its own view of
// the membership no longer holds it.
func (r *embeddedRun) wasRemoved(e *embed.Etcd) bool {
	if r.removed.Load() {
		return true
	}
	select {
	case <-e.Server.StopNotify():
		return !e.Server.IsMemberExist(e.Server.MemberID())
	default:
		return false
	}
}

func (r *embeddedRun) embedConfig(cfg Config, opts options) (*embed.Config, error) {
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("parse Config.PeerURL: %w", err)
	}
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("parse Config.ClientURL: %w", err)
	}
	ec := embed.NewConfig()
	ec.GRPCAdditionalServerOptions = r.gate.serverOptions()
	ec.ServiceRegister = func(gs *grpc.Server) {
		r.grpcMu.Lock()
		defer r.grpcMu.Unlock()
		r.grpcs = append(r.grpcs, gs)
	}
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	ec.InitialCluster = cfg.InitialCluster
	ec.ClusterState = cfg.ClusterState
	ec.ForceNewCluster = cfg.ForceNewCluster
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if cfg.ClusterToken != "" {
		ec.InitialClusterToken = cfg.ClusterToken
	}
	if cfg.TLS != nil {
		ec.ClientTLSInfo, ec.PeerTLSInfo = cfg.TLS.tlsInfos()
	}
	if opts.tick > 0 {
		ec.TickMs = uint(opts.tick.Milliseconds())
	}
	if opts.election > 0 {
		ec.ElectionMs = uint(opts.election.Milliseconds())
	}
	ec.LogLevel = "warn"
	core := newSlogCore(cfg.Logger, opts.etcdLog, &r.removed, &r.quiet)
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core, zap.WithFatalHook(FatalToStderr)))
	return ec, nil
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

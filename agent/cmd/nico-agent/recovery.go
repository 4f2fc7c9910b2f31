package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/agent/recovery"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/httpserve"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// errReleased: a recovery operation handed the host back; the agent
// exits 4 so that the service manager starts it again, serving the member
// from its (restored or rejoined) data dir.
var errReleased = errors.New("recovery released the host")

// recoveryRetry paces the recovery API's attempts to serve while the
// machine's certificates are not there yet (a first boot) or its port is
// taken.
const recoveryRetry = 2 * time.Second

// recoveryHost runs the recovery API (agent/recovery) beside the agent on
// a control-plane machine with a pki.dir, and the agent under it: an
// operation that holds the host stops the agent; its release ends the
// process (errReleased).
type recoveryHost struct {
	cfg      config.Agent
	rt       member.Runtime
	force    member.Runtime // for --force-new-cluster under the systemd runtime
	mesh     *gossip.Mesh
	log      *slog.Logger
	srv      *recovery.Server // made by serve's goroutine only
	released chan struct{}
	once     sync.Once
	held     atomic.Bool // the agent waits for a release
	holding  atomic.Bool // a stop for a hold came: the agent stops for it

	mu        sync.Mutex
	stopAgent context.CancelFunc // nil while no agent runs
	agentDone chan struct{}
}

// newRecovery is nil where the API is not served: not a control-plane
// machine, no pki.dir, or recovery.listen empty.
func newRecovery(cfg config.Agent, rt member.Runtime, mesh *gossip.Mesh, log *slog.Logger) *recoveryHost {
	if !cfg.HasRole(config.RoleControlPlane) || cfg.PKI.Dir == "" || cfg.Recovery.Listen == "" {
		return nil
	}
	r := &recoveryHost{cfg: cfg, rt: rt, mesh: mesh, log: log, released: make(chan struct{})}
	if cfg.Etcd.Runtime == config.RuntimeSystemd {
		// The systemd runtime does not pass --force-new-cluster: a
		// recovery's survivor starts once under the agent, from the same
		// binary, and the unit serves it after the release.
		r.force = member.NewExec(cfg.Etcd.Binary)
	}
	return r
}

// server is the API's server, made once the machine's certificates are
// there (the agent issues them at its first start).
func (r *recoveryHost) server() (*recovery.Server, error) {
	if r.srv != nil {
		return r.srv, nil
	}
	mt, ct, err := recovery.HostTLS(pki.Dir(r.cfg.PKI.Dir))
	if err != nil {
		return nil, err
	}
	r.srv = recovery.New(recovery.Host{
		Name: r.cfg.Name, DataDir: r.cfg.Etcd.DataDir, PeerURL: r.cfg.Etcd.PeerURL, ClientURL: r.cfg.Etcd.ClientURL,
		Runtime: r.rt, ForceRuntime: r.force, MemberTLS: mt, ClientTLS: ct, Log: r.log,
		StopAgent: r.stop,
		Release:   func() { r.once.Do(func() { close(r.released) }) },
		Peers:     func() []restore.AgentPeer { return meshPeers(r.mesh, r.cfg.Recovery.Listen) },
	})
	return r.srv, nil
}

// meshPeers are the control-plane members of the mesh, at the recovery
// port this agent listens on (one setting for the fleet).
func meshPeers(mesh *gossip.Mesh, listen string) []restore.AgentPeer {
	if mesh == nil {
		return nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	return recovery.MeshPeers(mesh.Nodes(), recovery.SamePort(port))
}

// serve runs the API until ctx ends, retrying while it cannot (no
// certificates yet, the port taken); the returned function waits for it.
func (r *recoveryHost) serve(ctx context.Context) (wait func()) {
	if r == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(recoveryRetry)
		defer tick.Stop()
		for {
			srv, err := r.server()
			if err == nil {
				var ep *httpserve.Endpoint
				if ep, err = recovery.Endpoint(r.cfg.Recovery.Listen, pki.Dir(r.cfg.PKI.Dir), srv, r.log); err == nil {
					err = ep.Serve(ctx)
				}
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("recovery API not serving; trying again", "listen", r.cfg.Recovery.Listen, "err", err, "in", recoveryRetry)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { <-done }
}

// run runs the agent (run) unless an operation holds the host; once one
// does, it waits for the release (errReleased) or ctx.
func (r *recoveryHost) run(ctx context.Context, run func(context.Context) error) error {
	if r == nil {
		return run(ctx)
	}
	// The hold is read and the agent's stop set under one lock: a stop
	// writes the hold before it takes the lock, so either this sees the
	// hold or the stop sees the agent to stop.
	r.mu.Lock()
	op, err := recovery.Held(r.cfg.Etcd.DataDir)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if op == "" {
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		r.stopAgent, r.agentDone = cancel, done
		r.mu.Unlock()
		err := run(actx)
		cancel()
		close(done)
		r.mu.Lock()
		r.stopAgent = nil
		r.mu.Unlock()
		if op, _ = recovery.Held(r.cfg.Etcd.DataDir); op == "" || ctx.Err() != nil {
			return err
		}
	} else {
		r.mu.Unlock()
	}
	r.held.Store(true)
	r.log.Warn("the host is held by a recovery operation: the agent waits for its release", "op", op)
	select {
	case <-r.released:
		return errReleased
	case <-ctx.Done():
		return nil
	}
}

// stop is the server's StopAgent: it ends the agent's run and waits for it.
func (r *recoveryHost) stop(ctx context.Context) error {
	r.holding.Store(true)
	r.mu.Lock()
	cancel, done := r.stopAgent, r.agentDone
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held tells whether an operation holds the host: the watchdog is fed
// meanwhile, the agent being stopped on purpose.
func (r *recoveryHost) Held() bool { return r != nil && (r.held.Load() || r.holding.Load()) }

// notifier is n, wrapped so that stopping for a hold is not reported as
// the service stopping.
func (r *recoveryHost) notifier(n agent.Notifier) agent.Notifier {
	if r == nil {
		return n
	}
	return holdNotifier{Notifier: n, r: r}
}

// holdNotifier is the agent's notifier under the recovery API: an agent
// stopped for a hold does not tell the service manager that the service
// stops (STOPPING=1 would leave nico-agent.service deactivating while it
// waits for the release), and says it is held instead.
type holdNotifier struct {
	agent.Notifier
	r *recoveryHost
}

// Stopping implements agent.Notifier.
func (n holdNotifier) Stopping() error {
	if n.r.holding.Load() {
		return n.Notifier.Status("held by a recovery operation: waiting for its release")
	}
	return n.Notifier.Stopping()
}

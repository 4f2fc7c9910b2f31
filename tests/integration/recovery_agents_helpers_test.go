package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/homystack/nico/agent/recovery"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/restore"
)

// recoveryHosts runs, beside agents of the fleet, the recovery API each
// control-plane nico-agent serves: stopping the agent when an operation
// holds the host, running it again (same config, its data dir) on release.
type recoveryHosts struct {
	f     *fleet
	mu    sync.Mutex
	addrs map[string]string             // node -> recovery API
	stops map[string]context.CancelFunc // node -> stop its endpoint
	waits []chan struct{}
	// meshes, when set, are the nodes' gossip members: each host's peers
	// are what its own mesh lists (recovery.MeshPeers), at the recovery
	// address the test gave each node.
	meshes map[string]*gossip.Mesh
	// gates hold an agent back after its release (heldBack) until closed;
	// calls counts each node's calls by path.
	gates   map[string]chan struct{}
	calls   map[string]int
	abandon chan struct{}
}

// serveRecovery starts the recovery API of each named (running) agent.
func serveRecovery(f *fleet, names ...string) *recoveryHosts {
	f.t.Helper()
	return serveRecoveryMesh(f, nil, names...)
}

// serveRecoveryMesh is serveRecovery whose hosts find their peers in the
// gossip meshes (node -> its member).
func serveRecoveryMesh(f *fleet, meshes map[string]*gossip.Mesh, names ...string) *recoveryHosts {
	f.t.Helper()
	h := &recoveryHosts{f: f, addrs: map[string]string{}, stops: map[string]context.CancelFunc{}, meshes: meshes,
		gates: map[string]chan struct{}{}, calls: map[string]int{}, abandon: make(chan struct{})}
	for _, n := range names {
		h.serve(n)
	}
	f.t.Cleanup(h.close)
	return h
}

// serve starts name's recovery API on a port of its own (etcdtest.FreePort:
// no other test, nor process, is given it), so that serveAt can bind it
// again after the API went down.
func (h *recoveryHosts) serve(name string) {
	h.serveAt(name, fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(h.f.t)))
}

// serveAt starts name's recovery API at addr (again: an agent restarted).
func (h *recoveryHosts) serveAt(name, addr string) {
	t := h.f.t
	cfg := h.f.Node(name).Cfg
	mt, ct, err := recovery.HostTLS(cfg.PKI.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, force := h.f.NewRuntime(), h.f.NewRuntime()
	srv := recovery.New(recovery.Host{
		Name: name, DataDir: cfg.DataDir, PeerURL: cfg.PeerURL, ClientURL: cfg.ClientURL,
		// A forced start runs under a runtime of its own, as nico-agent's
		// under the systemd runtime.
		Runtime: rt, ForceRuntime: force, MemberTLS: mt, ClientTLS: ct, Log: h.f.Log,
		StopAgent: func(context.Context) error {
			if n := h.f.Node(name); n != nil {
				if err := n.Stop(); err != nil && !errors.Is(err, context.Canceled) {
					return err
				}
			}
			return nil
		},
		// The agent starts again from its data dir, as systemd restarts
		// nico-agent after it exits on its release.
		Release: func() {
			gate := h.gate(name)
			if gate == nil {
				h.f.Run(cfg, h.f.NewRuntime())
				return
			}
			go func() {
				select {
				case <-gate:
					h.f.Run(cfg, h.f.NewRuntime())
				case <-h.abandon:
				}
			}()
		},
		Peers: func() []restore.AgentPeer { return h.peers(name) },
	})
	ep, err := recovery.Endpoint(addr, cfg.PKI.Dir, srv, h.f.Log)
	if err != nil {
		t.Fatal(err)
	}
	next := ep.Handler
	ep.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls[name+" "+r.URL.Path]++
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
	if err := ep.Bind(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ep.Serve(ctx); err != nil {
			t.Logf("recovery API of %s: %v", name, err)
		}
		_ = rt.Stop(context.Background())
		_ = force.Stop(context.Background())
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[name] = ep.Addr()
	h.stops[name] = cancel
	h.waits = append(h.waits, done)
}

// peers are the control-plane members of name's mesh, or without meshes
// every host's.
func (h *recoveryHosts) peers(name string) []restore.AgentPeer {
	if m := h.meshes[name]; m != nil {
		return recovery.MeshPeers(m.Nodes(), func(n gossip.NodeState) (string, bool) {
			a := h.addr(n.Name)
			return a, a != ""
		})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []restore.AgentPeer
	for n, a := range h.addrs {
		out = append(out, restore.AgentPeer{Node: n, Addr: a})
	}
	return out
}

// lose ends name's recovery API and its mesh member (its host is gone);
// the other meshes still list it, dead.
func (h *recoveryHosts) lose(name string) {
	h.mu.Lock()
	stop := h.stops[name]
	h.mu.Unlock()
	stop()
	if m := h.meshes[name]; m != nil {
		if err := m.Shutdown(); err != nil {
			h.f.t.Logf("shut %s's mesh member down: %v", name, err)
		}
	}
}

func (h *recoveryHosts) addr(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addrs[name]
}

// heldBack keeps name's agent from starting again once its host is
// handed back (its member then does not serve), until the returned
// function is called.
func (h *recoveryHosts) heldBack(name string) (letGo func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gate := make(chan struct{})
	h.gates[name] = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.gates, name)
			h.mu.Unlock()
			close(gate)
		})
	}
}

func (h *recoveryHosts) gate(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gates[name]
}

// called is how many calls of path name's recovery API has answered.
func (h *recoveryHosts) called(name, path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[name+" "+path]
}

func (h *recoveryHosts) close() {
	h.mu.Lock()
	select {
	case <-h.abandon:
	default:
		close(h.abandon)
	}
	for _, c := range h.stops {
		c()
	}
	waits := h.waits
	h.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-time.After(60 * time.Second):
			h.f.t.Error("a recovery API did not stop within 60s")
		}
	}
}

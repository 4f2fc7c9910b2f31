package agent

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/store"
)

// Gossip is the agent's use of the gossip mesh (*gossip.Mesh). The
// composition root runs the mesh; the agent only reads it and publishes
// its metadata.
type Gossip interface {
	Nodes() []gossip.NodeState
	Changed() <-chan struct{}
	SetMeta(gossip.Meta) error
}

// discover waits until the mesh names the etcd client URLs of voters and
// returns them: an agent configured with only gossip.seeds needs no
// etcd.endpoints. When the mesh names none within DiscoverGrace and the
// agent cached endpoints on an earlier run, it uses those (a machine the
// mesh no longer understands after key rotations gets back this way).
func (a *Agent) discover(ctx context.Context) ([]string, error) {
	grace := time.NewTimer(a.cfg.DiscoverGrace)
	defer grace.Stop()
	cached := false
	eps, err := gossip.AwaitEtcdEndpoints(ctx, a.cfg.Gossip, gossip.Discovery{
		Waiting: func() {
			a.status("waiting for the gossip mesh to name etcd voters")
			a.log.Info("waiting for the gossip mesh to name etcd voters")
		},
		Fallback: grace.C,
		Use: func() []string {
			eps, err := a.endpoints.read()
			if err != nil {
				a.log.Warn("no usable endpoints cache", "err", err)
			}
			cached = len(eps) > 0
			return eps
		},
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("agent: discovering etcd through gossip: %w", err)
	case cached:
		a.log.Warn("the gossip mesh names no etcd voters; using the endpoints cached on an earlier run", "after", a.cfg.DiscoverGrace, "endpoints", eps)
	default:
		a.log.Info("etcd endpoints learned from gossip", "endpoints", eps)
	}
	return eps, nil
}

// peerLearner is a mesh that can learn peers outside the mesh
// (*gossip.Mesh).
type peerLearner interface {
	SetPeerSource(gossip.PeerSource)
}

// storePeers names the gossip addresses the store's node records publish,
// this node's and removed nodes' left out: where a mesh member that is
// alone and whose seeds are gone rejoins.
func storePeers(st *store.Store, self string) gossip.PeerSource {
	return func(ctx context.Context) ([]string, error) {
		nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
		if err != nil {
			return nil, fmt.Errorf("agent: reading node records for gossip peers: %w", err)
		}
		return api.GossipPeers(nodes, self), nil
	}
}

// GossipRefreshInterval is how often a ready agent compares its gossip
// metadata (health digest, applied generation) with what it published,
// and publishes it again when it changed: well within the lan profile's
// one-second probe interval. A generation applied is published at once.
const GossipRefreshInterval = 250 * time.Millisecond

// gossipState is the agent's part in the mesh: what it publishes beyond
// its configuration, what it last published, the controllers that keep
// both and the mesh's keys current, and the peers it learns from the
// store.
type gossipState struct {
	cfg       *Config
	state     *nodeState
	endpoints *endpointsCache // where the etcd endpoints the mesh names are kept
	store     func() *store.Store
	now       func() time.Time
	log       *slog.Logger

	applied atomic.Int64 // the NixOS generation applied; 0: none yet

	mu   sync.Mutex
	last *gossip.Meta
}

// meta is the node's metadata now: on a healthy control-plane node
// whose member is a voter, where it serves etcd clients; the health digest;
// the generation it applied.
func (g *gossipState) meta() gossip.Meta {
	m := gossip.Meta{Name: g.cfg.Name, Version: g.cfg.Version}
	for _, r := range g.cfg.Roles {
		if slices.Contains([]api.Role{api.RoleControlPlane, api.RoleWorker}, r) {
			m.Roles = append(m.Roles, string(r))
		}
	}
	if g.state.isUp() {
		m.Health |= gossip.HealthOK
		if g.cfg.controlPlane() {
			m.ClientURL = g.cfg.ClientURL
			m.Health |= gossip.HealthEtcd | gossip.HealthVoter
		}
	}
	if g := g.applied.Load(); g > 0 {
		m.Generation = strconv.FormatInt(g, 10)
	}
	return m
}

// publish publishes the node's metadata when it differs from what
// was last published; a failure is logged (the refresh tries again).
func (g *gossipState) publish() {
	if err := g.publishMeta(); err != nil {
		g.log.Warn("publishing gossip metadata failed", "err", err)
	}
}

// publishMeta publishes the node's metadata when it differs from what was
// last published.
func (g *gossipState) publishMeta() error {
	if g.cfg.Gossip == nil {
		return nil
	}
	m := g.meta()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last != nil && reflect.DeepEqual(*g.last, m) {
		return nil
	}
	if err := g.cfg.Gossip.SetMeta(m); err != nil {
		return fmt.Errorf("agent: publish gossip metadata: %w", err)
	}
	g.last = &m
	return nil
}

// setApplied records the generation the node applied and publishes it.
func (g *gossipState) setApplied(gen int64) {
	if gen <= 0 || g.applied.Swap(gen) == gen {
		return
	}
	g.publish()
}

// refresh is the controller that publishes changed metadata every
// GossipRefreshInterval (tick-only: its inputs are the agent's state and
// the mesh) and caches the etcd endpoints the mesh names; nil without a
// mesh. While it runs (learnPeers), the mesh rejoins, when it is alone,
// through the peers the store's node records name.
func (g *gossipState) refresh() controller.Controller {
	if g.cfg.Gossip == nil {
		return nil
	}
	return &controller.Func{ControllerName: "gossip-refresh", Resync: GossipRefreshInterval, Do: func(context.Context) error {
		err := g.publishMeta()
		g.endpoints.save(gossip.EtcdEndpoints(g.cfg.Gossip.Nodes()), g.now())
		return err
	}}
}

// learnPeers lets the mesh learn peers from the store's node records until
// the returned stop is called.
func (g *gossipState) learnPeers() (stop func()) {
	pl, learns := g.cfg.Gossip.(peerLearner)
	if !learns || g.store() == nil {
		return func() {}
	}
	pl.SetPeerSource(storePeers(g.store(), g.cfg.Name))
	return func() { pl.SetPeerSource(nil) }
}

// keys is the controller that keeps the mesh's key generation in
// step with the stored one (nicoctl gossip rotate-key), watching
// store.GossipKeyKey; with a pki.dir, also its secret (rotate-key
// --new-secret): it opens the secret sealed to this node with node.key
// and keeps it in gossip.secret. nil without a mesh that takes keys.
func (g *gossipState) keys() controller.Controller {
	kr, ok := g.cfg.Gossip.(gossipkey.Keyring)
	if !ok || g.store() == nil {
		return nil
	}
	f := &gossipkey.Follower{St: g.store(), M: kr, Interval: gossipKeyResync, Log: g.log, Now: g.cfg.Clock.Now}
	if _, withSecret := kr.(gossipkey.SecretKeyring); withSecret && g.cfg.PKI.Dir != "" {
		f.Secret = &gossipkey.Member{Name: g.cfg.Name, Dir: g.cfg.PKI.Dir, Persist: true}
	}
	return &controller.Func{ControllerName: "gossip-keys", Prefixes: []string{store.GossipKeyKey}, Resync: gossipKeyResync, Do: f.Once}
}

// gossipKeyResync paces the gossip key follower besides its watch: the
// replaced secret is dropped gossipkey.SecretOverlap ticks after a switch.
const gossipKeyResync = 2 * time.Second

// gossipAddr is the address the node's mesh member is reached on, which
// its node record publishes (api.NodeStatus.GossipAddr); "" without one.
func gossipAddr(cfg *Config) string {
	if m, ok := cfg.Gossip.(interface{ Addr() string }); ok {
		return m.Addr()
	}
	return ""
}

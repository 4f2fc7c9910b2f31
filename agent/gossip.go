package agent

import (
	"context"
	"fmt"
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

// gossipState is what the agent publishes in the mesh beyond its
// configuration, and what it last published.
type gossipState struct {
	applied atomic.Int64 // the NixOS generation applied; 0: none yet

	mu   sync.Mutex
	last *gossip.Meta
}

// gossipMeta is the node's metadata now: on a healthy control-plane node
// whose member is a voter, where it serves etcd clients; the health digest;
// the generation it applied.
func (a *Agent) gossipMeta() gossip.Meta {
	m := gossip.Meta{Name: a.cfg.Name, Version: a.cfg.Version}
	for _, r := range a.cfg.Roles {
		if slices.Contains([]api.Role{api.RoleControlPlane, api.RoleWorker}, r) {
			m.Roles = append(m.Roles, string(r))
		}
	}
	if a.state.isUp() {
		m.Health |= gossip.HealthOK
		if a.controlPlane() {
			m.ClientURL = a.cfg.ClientURL
			m.Health |= gossip.HealthEtcd | gossip.HealthVoter
		}
	}
	if g := a.gossip.applied.Load(); g > 0 {
		m.Generation = strconv.FormatInt(g, 10)
	}
	return m
}

// publishGossip publishes the node's metadata when it differs from what
// was last published; a failure is logged (the refresh tries again).
func (a *Agent) publishGossip() {
	if err := a.publishMeta(); err != nil {
		a.log.Warn("publishing gossip metadata failed", "err", err)
	}
}

// publishMeta publishes the node's metadata when it differs from what was
// last published.
func (a *Agent) publishMeta() error {
	if a.cfg.Gossip == nil {
		return nil
	}
	m := a.gossipMeta()
	a.gossip.mu.Lock()
	defer a.gossip.mu.Unlock()
	if a.gossip.last != nil && reflect.DeepEqual(*a.gossip.last, m) {
		return nil
	}
	if err := a.cfg.Gossip.SetMeta(m); err != nil {
		return fmt.Errorf("agent: publish gossip metadata: %w", err)
	}
	a.gossip.last = &m
	return nil
}

// gossipApplied records the generation the node applied and publishes it.
func (a *Agent) gossipApplied(gen int64) {
	if gen <= 0 || a.gossip.applied.Swap(gen) == gen {
		return
	}
	a.publishGossip()
}

// gossipRefresh is the controller that publishes changed metadata every
// GossipRefreshInterval (tick-only: its inputs are the agent's state and
// the mesh) and caches the etcd endpoints the mesh names; nil without a
// mesh. While it runs (learnPeers), the mesh rejoins, when it is alone,
// through the peers the store's node records name.
func (a *Agent) gossipRefresh() controller.Controller {
	if a.cfg.Gossip == nil {
		return nil
	}
	return &controller.Func{ControllerName: "gossip-refresh", Resync: GossipRefreshInterval, Do: func(context.Context) error {
		err := a.publishMeta()
		a.endpoints.save(gossip.EtcdEndpoints(a.cfg.Gossip.Nodes()), a.Now())
		return err
	}}
}

// learnPeers lets the mesh learn peers from the store's node records until
// the returned stop is called.
func (a *Agent) learnPeers() (stop func()) {
	pl, learns := a.cfg.Gossip.(peerLearner)
	if !learns || a.store() == nil {
		return func() {}
	}
	pl.SetPeerSource(storePeers(a.store(), a.cfg.Name))
	return func() { pl.SetPeerSource(nil) }
}

// gossipKeys is the controller that keeps the mesh's key generation in
// step with the stored one (nicoctl gossip rotate-key), watching
// store.GossipKeyKey; with a pki.dir, also its secret (rotate-key
// --new-secret): it opens the secret sealed to this node with node.key
// and keeps it in gossip.secret. nil without a mesh that takes keys.
func (a *Agent) gossipKeys() controller.Controller {
	kr, ok := a.cfg.Gossip.(gossipkey.Keyring)
	if !ok || a.store() == nil {
		return nil
	}
	f := &gossipkey.Follower{St: a.store(), M: kr, Interval: gossipKeyResync, Log: a.log, Now: a.cfg.Clock.Now}
	if _, withSecret := kr.(gossipkey.SecretKeyring); withSecret && a.cfg.PKI.Dir != "" {
		f.Secret = &gossipkey.Member{Name: a.cfg.Name, Dir: a.cfg.PKI.Dir, Persist: true}
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

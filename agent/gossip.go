package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
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
// etcd.endpoints.
func (a *Agent) discover(ctx context.Context) ([]string, error) {
	logged := false
	for {
		if eps := gossip.EtcdEndpoints(a.cfg.Gossip.Nodes()); len(eps) > 0 {
			a.log.Info("etcd endpoints learned from gossip", "endpoints", eps)
			return eps, nil
		}
		if !logged {
			a.status("waiting for the gossip mesh to name etcd voters")
			a.log.Info("waiting for the gossip mesh to name etcd voters")
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent: discovering etcd through gossip: %w", ctx.Err())
		case <-a.cfg.Gossip.Changed():
		}
	}
}

// publishGossip tells the mesh what this node is and, on a control-plane
// node whose member is a voter, where it serves etcd clients.
func (a *Agent) publishGossip() {
	if a.cfg.Gossip == nil {
		return
	}
	m := gossip.Meta{Name: a.cfg.Name, Version: a.cfg.Version, Health: gossip.HealthOK}
	for _, r := range a.cfg.Roles {
		if slices.Contains([]api.Role{api.RoleControlPlane, api.RoleWorker}, r) {
			m.Roles = append(m.Roles, string(r))
		}
	}
	if a.controlPlane() {
		m.ClientURL = a.cfg.ClientURL
		m.Health |= gossip.HealthEtcd | gossip.HealthVoter
	}
	if err := a.cfg.Gossip.SetMeta(m); err != nil {
		a.log.Warn("publishing gossip metadata failed", "err", err)
	}
}

// followKeys keeps the mesh's key generation in step with the stored one
// (nicoctl gossip rotate-key) until ctx ends or stop is called.
func (a *Agent) followKeys(ctx context.Context) (stop func()) {
	kr, ok := a.cfg.Gossip.(gossipkey.Keyring)
	if !ok || a.st == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); gossipkey.Follow(ctx, a.st, kr, 2*time.Second, a.log) }()
	return func() { cancel(); <-done }
}

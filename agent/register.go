package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// register writes the node object, keeping its creation time.
func (a *Agent) register(ctx context.Context) error {
	old := &api.Node{}
	if err := a.store().Get(ctx, store.NodeKey(a.cfg.Name), old); errors.Is(err, store.ErrNotFound) {
		old = nil
	} else if err != nil {
		return fmt.Errorf("agent: register: %w", err)
	}
	n := a.nodeObject(old)
	if err := a.store().Put(ctx, store.NodeKey(a.cfg.Name), n); err != nil {
		return fmt.Errorf("agent: register: %w", err)
	}
	a.registered(n)
	return nil
}

// nodeObject is this node's object to register, keeping old's creation
// time and status (old nil: a new node).
func (a *Agent) nodeObject(old *api.Node) *api.Node {
	n := api.NewNode(a.cfg.Name)
	if old != nil {
		n.Metadata.CreatedAt = old.Metadata.CreatedAt
		n.Status = old.Status
	} else {
		n.Metadata.CreatedAt = a.Now()
	}
	n.Spec = api.NodeSpec{Roles: a.cfg.Roles, Bootstrap: a.cfg.Bootstrap, Labels: a.cfg.Labels}
	if a.controlPlane() {
		n.Spec.PeerURL, n.Spec.ClientURL = a.cfg.PeerURL, a.cfg.ClientURL
	}
	n.Status.AgentVersion = a.cfg.Version
	n.Status.EtcdVersion = a.runningEtcdVersion()
	n.Status.Certificate = a.nodeCertPEM()
	n.Status.GossipAddr = a.gossipAddr() // agent/gossip.go
	n.Status.Phase = api.NodeRegistered
	if a.controlPlane() && !a.state.memberRunning() {
		n.Status.Phase, n.Status.Message = api.NodeJoining, msgWaitLearner
	}
	n.Status.UpdatedAt = a.Now()
	return n
}

// registered keeps n, written, as the node's object.
func (a *Agent) registered(n *api.Node) {
	a.rec.adopt(n)
	a.log.Info("registered", "roles", a.cfg.Roles)
}

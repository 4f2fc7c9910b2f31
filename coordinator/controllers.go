package coordinator

import (
	"context"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// The leader's controllers, run as one group for the length of a term
// (Coordinator.term). Each watches only the prefixes it reads; what has no
// watch (etcd's member list, gossip, the clock) comes with the resync tick.
//
//	controller            watches                                      writes (fenced)
//	membership            nodes/ joins/ removals/ heartbeats/ ops/     ops/ active-op joins/ removals/
//	                      active-op                                    nodes/ liveness, etcd members
//	rollout               rollouts/ nixosconfigs/ nodes/ heartbeats/   rollouts/ nixosconfigs/ ops/
//	                      active-op                                    active-op, etcd leader
//	machine-pools         pools/ machines/ hypervisors/ nodes/         pools/ machines/ removals/
//	                      removals/ heartbeats/
//	identity-revocation   removals/ nodes/ heartbeats/                 removals/, etcd users and roles
func (c *Coordinator) leaderControllers(fence store.Fence) []controller.Controller {
	return []controller.Controller{
		&leaderController{
			c: c, name: "membership", reconcile: newReconciler(c, fence).reconcile,
			watches: []string{store.NodesDir, store.JoinsDir, store.RemovalsDir, store.HeartbeatsDir, store.OpsDir, store.ActiveOpKey},
		},
		&leaderController{
			c: c, name: "rollout", reconcile: (&rollouter{c: c, fence: fence}).reconcile,
			watches: []string{store.RolloutsDir, store.NixosConfigsDir, store.NodesDir, store.HeartbeatsDir, store.ActiveOpKey},
		},
		&leaderController{
			c: c, name: "machine-pools", reconcile: func(ctx context.Context) error { return c.reconcilePools(ctx, fence) },
			watches: []string{store.PoolsDir, store.MachinesDir, store.HypervisorsDir, store.NodesDir, store.RemovalsDir, store.HeartbeatsDir},
		},
		&leaderController{
			c: c, name: "identity-revocation", reconcile: func(ctx context.Context) error { return c.revokePass(ctx, fence) },
			watches: []string{store.RemovalsDir, store.NodesDir, store.HeartbeatsDir},
		},
	}
}

// leaderController is one of the leader's controllers: a reconcile over a
// term's fence, the prefixes it reads, and the coordinator's resync.
type leaderController struct {
	c         *Coordinator
	name      string
	watches   []string
	reconcile func(context.Context) error
}

// Name implements controller.Controller.
func (l *leaderController) Name() string { return l.name }

// Watches implements controller.Controller.
func (l *leaderController) Watches() []string { return l.watches }

// Reconcile implements controller.Controller.
func (l *leaderController) Reconcile(ctx context.Context) error { return l.reconcile(ctx) }

// ResyncInterval implements controller.Resyncer.
func (l *leaderController) ResyncInterval() time.Duration { return l.c.cfg.ResyncInterval }

package agent

import (
	"context"

	"github.com/homystack/nico/pkg/api"
)

// A control-plane node whose join request the leader marked Standby (the
// cluster has the voters its EtcdCluster asks for) is started: it tells
// the service manager it is ready and counts as healthy for the watchdog,
// with no member and none advertised in gossip, and keeps following its
// join request, with no deadline, until the leader adds it as a learner.
//
//	join filed --(marked Standby)--> standby: READY=1, healthy, waiting
//	                                    |
//	                                    +--(learner added)--> joining --(promoted)--> member
//
// A standby applies its desired NixOS generation like any node (the
// generations controller runs until the join ends; the ready node's own
// takes over then). It returns the stop of that controller.
func (a *Agent) becomeStandby(ctx context.Context, j *api.JoinRequest) (stop func()) {
	a.state.setStandby(true)
	a.log.Info("standby: the cluster has the voters it wants; waiting to be added", "reason", j.Status.Message)
	a.node.setPhase(ctx, api.NodeStandby, j.Status.Message)
	// A standby may wait long for its learner: its identity is made now
	// (tried again after the join should this fail).
	if err := a.identity().finish(ctx); err != nil && ctx.Err() == nil {
		a.log.Warn("etcd identity not finished; tried again once a voter", "err", err)
	}
	a.status("standby: waiting for the cluster to want another voter")
	if err := a.notify.Ready(); err != nil {
		a.log.Debug("telling the service manager the standby is ready", "err", err)
	}
	if a.cfg.Applier == nil {
		return func() {}
	}
	return (&groups{rt: a.rt}).start(ctx, a.generations()).stop
}

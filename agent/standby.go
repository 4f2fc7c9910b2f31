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
func (a *Agent) becomeStandby(ctx context.Context, j *api.JoinRequest) {
	a.standby.Store(true)
	a.log.Info("standby: the cluster has the voters it wants; waiting to be added", "reason", j.Status.Message)
	a.setPhase(ctx, api.NodeStandby, j.Status.Message)
	a.status("standby: waiting for the cluster to want another voter")
	if err := a.notify.Ready(); err != nil {
		a.log.Debug("telling the service manager the standby is ready", "err", err)
	}
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
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

// shedToStandby tells whether this node's removal keeps it as a standby
// (api.RemoveRequestSpec.Standby), read through the cluster's other
// members: the local one is gone.
func (a *Agent) shedToStandby(ctx context.Context) bool {
	if a.store() == nil || a.connectOthers() != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removedRecordWait)
	defer cancel()
	r := &api.RemoveRequest{}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
	_, err := backoff.Retry(rctx, func() (struct{}, error) {
		err := a.store().Get(rctx, store.RemovalKey(a.cfg.Name), r)
		if errors.Is(err, store.ErrNotFound) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b))
	return err == nil && r.Spec.Standby
}

// backToStandby is the removal path of a voter shed to a standby: wipe the
// member's data, keep the machine (no release) and its heartbeat, drop the
// removal request once the leader finished it (so that the leader does not
// revoke the node's identity when the agent stops), and return ErrStandby:
// the agent starts again and files a new join request.
func (a *Agent) backToStandby(ctx context.Context, why string) error {
	a.log.Info("member removed to make this node a standby; wiping member data", "why", why)
	wctx, cancel := context.WithTimeout(ctx, removedMemberWait)
	backup, err := a.member.stopAndWipe(wctx)
	cancel()
	if err != nil {
		a.log.Error("member data not wiped; the next start wipes it", "err", err)
	} else {
		a.log.Info("data dir wiped", "copy", backup)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), removedRecordWait)
	defer rcancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
	_, derr := backoff.Retry(rctx, func() (struct{}, error) {
		r := &api.RemoveRequest{}
		switch err := a.store().Get(rctx, store.RemovalKey(a.cfg.Name), r); {
		case errors.Is(err, store.ErrNotFound):
			return struct{}{}, nil
		case err != nil:
			return struct{}{}, err
		case !r.Status.Phase.Finished():
			return struct{}{}, fmt.Errorf("agent: removal request still %q", r.Status.Phase)
		}
		return struct{}{}, a.store().Delete(rctx, store.RemovalKey(a.cfg.Name))
	}, backoff.WithBackOff(b))
	a.node.setPhase(rctx, api.NodeStandby, "member removed to make this node a standby; the agent starts again")
	if derr != nil {
		return fmt.Errorf("%w: clearing the removal request: %w", ErrStandby, derr)
	}
	return ErrStandby
}

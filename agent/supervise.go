package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// memberCheckInterval is how often the supervise controller looks at the
// local member and at an upgrade request.
const memberCheckInterval = 500 * time.Millisecond

// supervise runs the ready node's controllers until ctx ends (nil), the
// heartbeat's group ends (an error), the node was removed (ErrRemoved,
// after the removal path) or a new agent must start (ErrUpgraded). ctrls
// run first, and stop last, before the supervise and removal controllers.
func (a *Agent) supervise(ctx context.Context, hb *group, ctrls []controller.Controller) error {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-hb.done:
			cancel()
		case <-gctx.Done():
		}
	}()
	err := a.rt.Run(gctx, append(ctrls, a.memberSupervisor(), a.removalWatch())...)
	e, exit := errors.AsType[exitError](err)
	switch {
	case ctx.Err() != nil:
		return nil
	case exit && errors.Is(e.err, ErrRemoved):
		return a.removed(ctx, e.why)
	case exit:
		return e.err
	case err != nil:
		return err
	}
	return fmt.Errorf("agent: heartbeat stopped: %v", hb.err)
}

// supervisorSignal wakes the member supervisor: on a new etcd version
// wanted, and on an upgrade asked, which ends Run with ErrUpgraded at the
// supervisor's next reconcile, between member restarts.
type supervisorSignal struct {
	woken chan struct{} // the supervisor's Wake; holds one wake at most
	asked atomic.Bool   // an upgrade asked: a generation brought a new agent, or the Reloader wants one
}

// wake wakes the supervisor, unless a wake is already queued.
func (s *supervisorSignal) wake() {
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

// askUpgrade asks the supervisor to end Run with ErrUpgraded.
func (s *supervisorSignal) askUpgrade() {
	s.asked.Store(true)
	s.wake()
}

// upgradeAsked tells whether an upgrade was asked.
func (s *supervisorSignal) upgradeAsked() bool { return s.asked.Load() }

// memberSupervisor is the controller that restarts a member that crashed
// (after a backoff that grows with each crash), ends the group when the
// cluster removed the member, and ends it with ErrUpgraded when a
// generation brought a new agent (agent/upgrade.go) or the Reloader asks
// for one: between member restarts, never in one. Tick-only (the member
// is a process), and woken by an upgrade request.
func (a *Agent) memberSupervisor() controller.Controller {
	crashes := &backoff.ExponentialBackOff{InitialInterval: time.Second, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 30 * time.Second}
	var restartAt time.Time
	n := 0
	return &controller.Func{ControllerName: "member", Resync: memberCheckInterval, Wake: a.supervisor.woken, Do: func(ctx context.Context) error {
		if a.supervisor.upgradeAsked() {
			return exitError{err: ErrUpgraded}
		}
		if !a.controlPlane() {
			return nil
		}
		if a.state.memberRunning() {
			select {
			case <-a.runtime.Done():
			default:
				return a.followEtcdVersion(ctx)
			}
			err := a.runtime.Err()
			if errors.Is(err, member.ErrRemoved) {
				return exitError{err: ErrRemoved, why: "the cluster removed this member"}
			}
			a.state.memberCrashed()
			n++
			d := crashes.NextBackOff()
			restartAt = a.cfg.Clock.Now().Add(d)
			a.log.Error("member exited; restarting it", "err", err, "crashes", n, "in", d)
		}
		if a.cfg.Clock.Now().Before(restartAt) {
			return nil
		}
		if err := a.member.start(ctx, "", "existing"); err != nil {
			if errors.Is(err, member.ErrRemoved) {
				return exitError{err: ErrRemoved, why: "the cluster removed this member while it was down"}
			}
			restartAt = a.cfg.Clock.Now().Add(crashes.NextBackOff())
			return fmt.Errorf("agent: restart member: %w", err)
		}
		a.state.setUp(true)
		return nil
	}}
}

// removalResync is the removal watch's resync tick, besides its watch.
const removalResync = 10 * time.Second

// removalWatch is the controller that ends the group when this node's
// removal request is done (the leader removed its member): the removal
// path (removed) follows.
func (a *Agent) removalWatch() controller.Controller {
	return &controller.Func{ControllerName: "removal", Prefixes: []string{store.RemovalKey(a.cfg.Name)}, Resync: removalResync, Do: func(ctx context.Context) error {
		done, err := a.removalDone(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		case done:
			return exitError{err: ErrRemoved, why: "removal request done"}
		}
		return nil
	}}
}

func (a *Agent) removalDone(ctx context.Context) (bool, error) {
	r := &api.RemoveRequest{}
	if err := a.store().Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil {
		return false, err
	}
	return r.Status.Phase == api.RemoveDone, nil
}

// Bounds of the removal path: how long it waits for a member that does not
// stop before it leaves the wipe to the next start, and how long it retries
// recording the removal in the store.
const (
	removedMemberWait = time.Minute
	removedRecordWait = 30 * time.Second
)

// removed stops and wipes the member and records the node as removed. The
// finished removal request stays as the record; the agent clears it when it
// is started again, and then rejoins anew. It returns ErrRemoved whatever
// happens on the way (wrapping what failed): a member that would not stop
// is wiped at the next start (localMember.prepare), which finds it removed.
func (a *Agent) removed(ctx context.Context, why string) error {
	a.state.setUp(false)
	if a.controlPlane() && a.shedToStandby(ctx) {
		return a.backToStandby(ctx, why)
	}
	a.log.Warn("node removed from the cluster; wiping member data", "why", why)
	failpoint.Hit(failpoint.AgentRemoved)
	var errs []error
	if !a.controlPlane() {
		if err := a.member.stop(ctx); err != nil {
			a.log.Warn("stop member", "err", err)
		}
	} else {
		wctx, cancel := context.WithTimeout(ctx, removedMemberWait)
		backup, err := a.member.stopAndWipe(wctx)
		cancel()
		if err != nil {
			a.log.Error("member data not wiped; the next start wipes it", "err", err)
			errs = append(errs, fmt.Errorf("wipe after removal: %w", err))
		} else {
			a.log.Info("data dir wiped", "copy", backup)
		}
	}
	if err := a.recordRemoved(ctx, why); err != nil {
		a.log.Warn("cannot record the removal", "err", err)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrRemoved, errors.Join(errs...))
	}
	return ErrRemoved
}

// recordRemoved writes the node's phase Removed through the cluster's other
// members, releases the machine (onRemoveFlake) and drops its heartbeat,
// retrying the writes for up to removedRecordWait, also after ctx ended.
func (a *Agent) recordRemoved(ctx context.Context, why string) error {
	if err := a.connectOthers(); err != nil {
		return err
	}
	a.rec.update(func(s *api.NodeStatus) { s.MemberID, s.MemberState = 0, api.MemberNone })
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removedRecordWait)
	defer cancel()
	retry := func(what string, op func() error) error {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
		_, err := backoff.Retry(rctx, func() (struct{}, error) { return struct{}{}, op() }, backoff.WithBackOff(b))
		if err != nil {
			return fmt.Errorf("agent: record removal: %s: %w", what, err)
		}
		return nil
	}
	if err := retry("node phase", func() error { return a.node.writePhase(rctx, api.NodeRemoved, why) }); err != nil {
		return err
	}
	a.generationRunner().release(ctx) // onRemoveFlake, agent/generation.go
	// Last: with the heartbeat gone the leader deletes this node's etcd
	// identity (coordinator/revoke.go), and nothing above could write.
	// The heartbeat stops first (revoking its lease), or it would write
	// its key again.
	if a.stopHeartbeat != nil {
		a.stopHeartbeat()
	}
	return retry("heartbeat", func() error {
		err := a.store().Delete(rctx, store.HeartbeatKey(a.cfg.Name))
		if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserNotFound) || errors.Is(err, rpctypes.ErrAuthFailed) {
			// The leader revoked this node's identity, which it does only
			// once the heartbeat is gone (stopping it revoked its lease):
			// nothing is left to delete.
			a.log.Info("identity already revoked; the heartbeat is gone", "err", err)
			return nil
		}
		return err
	})
}

// connectOthers points the store client at the cluster's other members,
// the local one being gone. The client stays the same (SetEndpoints), so
// the goroutines that use it meanwhile keep a working client.
func (a *Agent) connectOthers() error {
	var eps []string
	for _, e := range append(a.client().Endpoints(), a.cfg.Endpoints...) {
		if e != a.cfg.ClientURL && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return fmt.Errorf("agent: no etcd endpoint but the removed local member's (%s) is known", a.cfg.ClientURL)
	}
	a.client().SetEndpoints(eps...)
	a.endpoints.save(eps, a.Now())
	return nil
}

// clearFinishedRemoval drops a removal of this node that finished while the
// agent was away: the node was removed, its data wiped at start, and it now
// joins anew.
func (a *Agent) clearFinishedRemoval(ctx context.Context) {
	r := &api.RemoveRequest{}
	if err := a.store().Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil || !r.Status.Phase.Finished() {
		return
	}
	a.log.Info("clearing a finished removal request of this node", "phase", r.Status.Phase)
	_ = a.store().Delete(ctx, store.RemovalKey(a.cfg.Name))
}

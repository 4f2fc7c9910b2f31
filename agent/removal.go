package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// removal is the node's way out of the etcd cluster once the leader
// removed its member: it watches the node's removal request, stops and
// wipes the member, records the node as removed through the other
// members and gives the machine back, or, for a voter shed to a standby,
// keeps the machine and starts the agent again.
type removal struct {
	cfg       *Config
	log       *slog.Logger
	now       func() time.Time
	state     *nodeState
	rec       *nodeRecord
	member    *localMember
	node      *nodeWriter
	endpoints *endpointsCache
	store     func() *store.Store
	client    func() *clientv3.Client
	// release gives the machine back (the applier's onRemoveFlake).
	release func(ctx context.Context)
	// stopHeartbeat stops the heartbeat and waits for its lease's revoke.
	stopHeartbeat func()
}

// removalResync is the removal controller's tick besides its watch, a
// safety net: the watch misses no change.
const removalResync = time.Minute

// watch is the controller that ends the group when this node's
// removal request is done (the leader removed its member): the removal
// path (removed) follows.
func (rm *removal) watch() controller.Controller {
	return &controller.Func{ControllerName: "removal", Prefixes: []string{store.RemovalKey(rm.cfg.Name)}, Resync: removalResync, Do: func(ctx context.Context) error {
		done, err := rm.done(ctx)
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

// done tells whether the node's removal request is done.
func (rm *removal) done(ctx context.Context) (bool, error) {
	r := &api.RemoveRequest{}
	if err := rm.store().Get(ctx, store.RemovalKey(rm.cfg.Name), r); err != nil {
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
func (rm *removal) removed(ctx context.Context, why string) error {
	rm.state.setUp(false)
	if rm.cfg.controlPlane() && rm.shedToStandby(ctx) {
		return rm.backToStandby(ctx, why)
	}
	rm.log.Warn("node removed from the cluster; wiping member data", "why", why)
	failpoint.Hit(failpoint.AgentRemoved)
	var errs []error
	if !rm.cfg.controlPlane() {
		if err := rm.member.stop(ctx); err != nil {
			rm.log.Warn("stop member", "err", err)
		}
	} else {
		wctx, cancel := context.WithTimeout(ctx, removedMemberWait)
		backup, err := rm.member.stopAndWipe(wctx)
		cancel()
		if err != nil {
			rm.log.Error("member data not wiped; the next start wipes it", "err", err)
			errs = append(errs, fmt.Errorf("wipe after removal: %w", err))
		} else {
			rm.log.Info("data dir wiped", "copy", backup)
		}
	}
	if err := rm.record(ctx, why); err != nil {
		rm.log.Warn("cannot record the removal", "err", err)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrRemoved, errors.Join(errs...))
	}
	return ErrRemoved
}

// record writes the node's phase Removed through the cluster's other
// members, releases the machine (onRemoveFlake) and drops its heartbeat,
// retrying the writes for up to removedRecordWait, also after ctx ended.
func (rm *removal) record(ctx context.Context, why string) error {
	if err := rm.connectOthers(); err != nil {
		return err
	}
	rm.rec.update(func(s *api.NodeStatus) { s.MemberID, s.MemberState = 0, api.MemberNone })
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
	if err := retry("node phase", func() error { return rm.node.writePhase(rctx, api.NodeRemoved, why) }); err != nil {
		return err
	}
	rm.release(ctx) // onRemoveFlake, agent/generation.go
	// Last: with the heartbeat gone the leader deletes this node's etcd
	// identity (coordinator/revoke.go), and nothing above could write.
	// The heartbeat stops first (revoking its lease), or it would write
	// its key again.
	rm.stopHeartbeat()
	return retry("heartbeat", func() error {
		err := rm.store().Delete(rctx, store.HeartbeatKey(rm.cfg.Name))
		if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserNotFound) || errors.Is(err, rpctypes.ErrAuthFailed) {
			// The leader revoked this node's identity, which it does only
			// once the heartbeat is gone (stopping it revoked its lease):
			// nothing is left to delete.
			rm.log.Info("identity already revoked; the heartbeat is gone", "err", err)
			return nil
		}
		return err
	})
}

// connectOthers points the store client at the cluster's other members,
// the local one being gone. The client stays the same (SetEndpoints), so
// the goroutines that use it meanwhile keep a working client.
func (rm *removal) connectOthers() error {
	var eps []string
	for _, e := range append(rm.client().Endpoints(), rm.cfg.Endpoints...) {
		if e != rm.cfg.ClientURL && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return fmt.Errorf("agent: no etcd endpoint but the removed local member's (%s) is known", rm.cfg.ClientURL)
	}
	rm.client().SetEndpoints(eps...)
	rm.endpoints.save(eps, rm.now())
	return nil
}

// clearFinished drops a removal of this node that finished while the
// agent was away: the node was removed, its data wiped at start, and it now
// joins anew.
func (rm *removal) clearFinished(ctx context.Context) {
	r := &api.RemoveRequest{}
	if err := rm.store().Get(ctx, store.RemovalKey(rm.cfg.Name), r); err != nil || !r.Status.Phase.Finished() {
		return
	}
	rm.log.Info("clearing a finished removal request of this node", "phase", r.Status.Phase)
	_ = rm.store().Delete(ctx, store.RemovalKey(rm.cfg.Name))
}

// shedToStandby tells whether this node's removal keeps it as a standby
// (api.RemoveRequestSpec.Standby), read through the cluster's other
// members: the local one is gone.
func (rm *removal) shedToStandby(ctx context.Context) bool {
	if rm.store() == nil || rm.connectOthers() != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removedRecordWait)
	defer cancel()
	r := &api.RemoveRequest{}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
	_, err := backoff.Retry(rctx, func() (struct{}, error) {
		err := rm.store().Get(rctx, store.RemovalKey(rm.cfg.Name), r)
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
func (rm *removal) backToStandby(ctx context.Context, why string) error {
	rm.log.Info("member removed to make this node a standby; wiping member data", "why", why)
	wctx, cancel := context.WithTimeout(ctx, removedMemberWait)
	backup, err := rm.member.stopAndWipe(wctx)
	cancel()
	if err != nil {
		rm.log.Error("member data not wiped; the next start wipes it", "err", err)
	} else {
		rm.log.Info("data dir wiped", "copy", backup)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), removedRecordWait)
	defer rcancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
	_, derr := backoff.Retry(rctx, func() (struct{}, error) {
		r := &api.RemoveRequest{}
		switch err := rm.store().Get(rctx, store.RemovalKey(rm.cfg.Name), r); {
		case errors.Is(err, store.ErrNotFound):
			return struct{}{}, nil
		case err != nil:
			return struct{}{}, err
		case !r.Status.Phase.Finished():
			return struct{}{}, fmt.Errorf("agent: removal request still %q", r.Status.Phase)
		}
		return struct{}{}, rm.store().Delete(rctx, store.RemovalKey(rm.cfg.Name))
	}, backoff.WithBackOff(b))
	rm.node.setPhase(rctx, api.NodeStandby, "member removed to make this node a standby; the agent starts again")
	if derr != nil {
		return fmt.Errorf("%w: clearing the removal request: %w", ErrStandby, derr)
	}
	return ErrStandby
}

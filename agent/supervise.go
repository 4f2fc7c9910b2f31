package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	nicobackoff "github.com/homystack/nico/pkg/backoff"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// supervise keeps the node in the fleet: it restarts a member that crashed,
// leaves when the node was removed, and stops when a generation brought a
// new agent (agent/upgrade.go).
func (a *Agent) supervise(ctx context.Context, hbDone <-chan struct{}) error {
	removals := watchKey(ctx, a.cli, store.RemovalKey(a.cfg.Name))
	defer removals.Stop()
	b := nicobackoff.Backoff{Base: time.Second, Max: 30 * time.Second, Factor: 2, Jitter: 0.3}
	crashes := 0
	for {
		if done, err := a.removalDone(ctx); err == nil && done {
			return a.removed(ctx, "removal request done")
		}
		var memberDone <-chan struct{}
		if a.running {
			memberDone = a.runtime.Done()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-hbDone:
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("agent: heartbeat stopped")
		case <-a.upgrade:
			return ErrUpgraded
		case <-removals.C:
		case <-memberDone:
			err := a.runtime.Err()
			if errors.Is(err, member.ErrRemoved) {
				return a.removed(ctx, "the cluster removed this member")
			}
			a.running = false
			a.healthy.Store(false)
			a.log.Error("member exited; restarting it", "err", err, "crashes", crashes+1)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.Delay(crashes)):
			}
			crashes++
			if err := a.startMember(ctx, "", "existing"); err != nil {
				if errors.Is(err, member.ErrRemoved) {
					return a.removed(ctx, "the cluster removed this member while it was down")
				}
				a.log.Error("restart member", "err", err)
				continue
			}
			a.healthy.Store(true)
		}
	}
}

func (a *Agent) removalDone(ctx context.Context) (bool, error) {
	r := &api.RemoveRequest{}
	if err := a.st.Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil {
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
// is wiped at the next start (prepareMember), which finds it removed.
func (a *Agent) removed(ctx context.Context, why string) error {
	a.healthy.Store(false)
	a.log.Warn("node removed from the cluster; wiping member data", "why", why)
	var errs []error
	if !a.controlPlane() {
		if err := a.stopMember(ctx); err != nil {
			a.log.Warn("stop member", "err", err)
		}
	} else {
		wctx, cancel := context.WithTimeout(ctx, removedMemberWait)
		backup, err := a.stopAndWipe(wctx)
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
	a.nodeMu.Lock()
	if a.node != nil {
		a.node.Status.MemberID, a.node.Status.MemberState = 0, api.MemberNone
	}
	a.nodeMu.Unlock()
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
	if err := retry("node phase", func() error { return a.writePhase(rctx, api.NodeRemoved, why) }); err != nil {
		return err
	}
	a.release(ctx) // onRemoveFlake, agent/generation.go
	// Last: with the heartbeat gone the leader deletes this node's etcd
	// identity (coordinator/revoke.go), and nothing above could write.
	return retry("heartbeat", func() error { return a.st.Delete(rctx, store.HeartbeatKey(a.cfg.Name)) })
}

// connectOthers points the store client at the cluster's other members,
// the local one being gone. The client stays the same (SetEndpoints), so
// the goroutines that use it meanwhile keep a working client.
func (a *Agent) connectOthers() error {
	var eps []string
	for _, e := range append(a.cli.Endpoints(), a.cfg.Endpoints...) {
		if e != a.cfg.ClientURL && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return fmt.Errorf("agent: no etcd endpoint but the removed local member's (%s) is known", a.cfg.ClientURL)
	}
	a.cli.SetEndpoints(eps...)
	a.cacheEndpoints(eps)
	return nil
}

// clearFinishedRemoval drops a removal of this node that finished while the
// agent was away: the node was removed, its data wiped at start, and it now
// joins anew.
func (a *Agent) clearFinishedRemoval(ctx context.Context) {
	r := &api.RemoveRequest{}
	if err := a.st.Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil || !r.Status.Phase.Finished() {
		return
	}
	a.log.Info("clearing a finished removal request of this node", "phase", r.Status.Phase)
	_ = a.st.Delete(ctx, store.RemovalKey(a.cfg.Name))
}

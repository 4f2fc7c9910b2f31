package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
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
	err := a.rt.Run(gctx, append(ctrls, a.supervision.controller(), a.removal.watch())...)
	e, exit := errors.AsType[exitError](err)
	switch {
	case ctx.Err() != nil:
		return nil
	case exit && errors.Is(e.err, ErrRemoved):
		return a.removal.removed(ctx, e.why)
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

// supervision keeps the local member running on the etcd version the
// leader wants here: it restarts a member that crashed, follows the
// node's NodeEtcdVersion (agent/etcd_version.go) and ends the agent's
// controllers when the cluster removed the member or an upgrade is asked.
type supervision struct {
	cfg    *Config
	log    *slog.Logger
	state  *nodeState
	member *localMember
	node   *nodeWriter
	rec    *nodeRecord
	signal *supervisorSignal
	store  func() *store.Store
}

// controller is the controller that restarts a member that crashed
// (after a backoff that grows with each crash), ends the group when the
// cluster removed the member, and ends it with ErrUpgraded when a
// generation brought a new agent (agent/upgrade.go) or the Reloader asks
// for one: between member restarts, never in one. Tick-only (the member
// is a process), and woken by an upgrade request.
func (v *supervision) controller() controller.Controller {
	crashes := &backoff.ExponentialBackOff{InitialInterval: time.Second, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 30 * time.Second}
	var restartAt time.Time
	n := 0
	return &controller.Func{ControllerName: "member", Resync: memberCheckInterval, Wake: v.signal.woken, Do: func(ctx context.Context) error {
		if v.signal.upgradeAsked() {
			return exitError{err: ErrUpgraded}
		}
		if !v.cfg.controlPlane() {
			return nil
		}
		if v.state.memberRunning() {
			select {
			case <-v.member.runtime.Done():
			default:
				return v.followVersion(ctx)
			}
			err := v.member.runtime.Err()
			if errors.Is(err, member.ErrRemoved) {
				return exitError{err: ErrRemoved, why: "the cluster removed this member"}
			}
			v.state.memberCrashed()
			n++
			d := crashes.NextBackOff()
			restartAt = v.cfg.Clock.Now().Add(d)
			v.log.Error("member exited; restarting it", "err", err, "crashes", n, "in", d)
		}
		if v.cfg.Clock.Now().Before(restartAt) {
			return nil
		}
		if err := v.member.start(ctx, "", "existing"); err != nil {
			if errors.Is(err, member.ErrRemoved) {
				return exitError{err: ErrRemoved, why: "the cluster removed this member while it was down"}
			}
			restartAt = v.cfg.Clock.Now().Add(crashes.NextBackOff())
			return fmt.Errorf("agent: restart member: %w", err)
		}
		v.state.setUp(true)
		return nil
	}}
}

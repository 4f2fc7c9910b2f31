package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// LearnerObserveEvery is how often the leader's membership controller
// observes the cluster while a learner is a member: etcd's member list has
// no watch, and a learner's progress (started, caught up, promotable)
// shows only there, so a pass that left a learner in place asks for the
// next one this soon instead of waiting for the resync tick.
const LearnerObserveEvery = 50 * time.Millisecond

// reconciler is the leader's membership controller (controllers.go):
// re-read every input, plan one step, apply it. The step's own journal
// write wakes it for the next step; etcd's member list has no watch and
// comes with the resync tick, or every LearnerObserveEvery while a
// learner is a member (wake).
type reconciler struct {
	c     *Coordinator
	fence store.Fence
	last  string
	// wake holds at most one pending wake-up (the controller's Wake).
	wake chan struct{}
}

func newReconciler(c *Coordinator, fence store.Fence) *reconciler {
	return &reconciler{c: c, fence: fence, wake: make(chan struct{}, 1)}
}

// reconcile is the controller's Reconcile.
func (r *reconciler) reconcile(ctx context.Context) error {
	step, err := r.once(ctx)
	r.c.Metrics.MembershipStep(step.Step, err)
	if step.learner {
		r.c.cfg.Clock.AfterFunc(LearnerObserveEvery, func() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		})
	}
	return err
}

// pass is what once did: the step, and whether a learner was a member
// when it planned.
type pass struct {
	membership.Step
	learner bool
}

// once observes, plans and applies one step.
func (r *reconciler) once(ctx context.Context) (pass, error) {
	obs, err := observe(ctx, r.c.store, r.c.admin.Observe)
	if err != nil {
		return pass{}, err
	}
	p := pass{learner: slices.ContainsFunc(obs.Members, func(m membership.Member) bool { return m.Learner })}
	now := r.c.Now()
	ec, err := r.c.ensureCluster(ctx, r.fence, obs, now)
	if err != nil {
		return p, err
	}
	obs.Cluster = ec.Spec
	live := r.c.live.update(now, r.c.cfg.Gossip, obs.Observed)
	r.c.Metrics.MembershipPass(obs.Observed, live, now)
	if err := r.c.live.publish(ctx, r.c.store, r.fence, r.c.cfg.Name, now, live); err != nil {
		r.c.log.Warn("publishing node liveness failed", "err", err)
	}
	if r.c.cfg.Gossip != nil {
		// Without gossip the planner keeps to members' own health: a
		// lapsed lease alone is not taken as a dead member.
		obs.Liveness = live
	}
	step := membership.Plan(obs.Observed, policyOf(ec.Spec.Policy, r.c.cfg.Policy), now)
	p.Step = step
	if s := step.String(); s != r.last {
		lvl := r.c.log.Info
		if step.Action == membership.None {
			lvl = r.c.log.Debug
		}
		lvl("step", "action", string(step.Action), "op", opName(step), "node", step.Request, "member", step.Member.String(), "reason", step.Reason)
		r.last = s
	}
	if r.c.OnStep != nil && step.Action != membership.None {
		r.c.OnStep(step)
	}
	// Before the step, from what this pass observed: a learner the step
	// adds publishes its own values (executor.learnerAdded).
	if err := r.c.syncExternalStarts(ctx, r.fence, obs); err != nil {
		return p, err
	}
	if err := (&executor{c: r.c, fence: r.fence, obs: obs, now: now}).apply(ctx, step); err != nil {
		return p, fmt.Errorf("%s: %w", step.Action, err)
	}
	return p, nil
}

func opName(s membership.Step) string {
	if s.Op == nil {
		return ""
	}
	return s.Op.Metadata.Name
}

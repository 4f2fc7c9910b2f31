package coordinator

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// reconciler is the leader's membership controller (controllers.go):
// re-read every input, plan one step, apply it. The step's own journal
// write wakes it for the next step; etcd's member list has no watch and
// comes with the resync tick.
type reconciler struct {
	c     *Coordinator
	fence store.Fence
	last  string
}

func newReconciler(c *Coordinator, fence store.Fence) *reconciler {
	return &reconciler{c: c, fence: fence}
}

// reconcile is the controller's Reconcile.
func (r *reconciler) reconcile(ctx context.Context) error {
	step, err := r.once(ctx)
	r.c.Metrics.MembershipStep(step, err)
	return err
}

// once observes, plans and applies one step.
func (r *reconciler) once(ctx context.Context) (membership.Step, error) {
	obs, err := observe(ctx, r.c.store, r.c.admin.Observe)
	if err != nil {
		return membership.Step{}, err
	}
	now := r.c.Now()
	ec, err := r.c.ensureCluster(ctx, r.fence, obs, now)
	if err != nil {
		return membership.Step{}, err
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
		return step, err
	}
	if err := (&executor{c: r.c, fence: r.fence, obs: obs, now: now}).apply(ctx, step); err != nil {
		return step, fmt.Errorf("%s: %w", step.Action, err)
	}
	return step, nil
}

func opName(s membership.Step) string {
	if s.Op == nil {
		return ""
	}
	return s.Op.Metadata.Name
}

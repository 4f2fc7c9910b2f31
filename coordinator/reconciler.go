package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
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
	d    membershipDeps
	last string
	// wake holds at most one pending wake-up (the controller's Wake).
	wake chan struct{}
}

// newReconciler returns the membership controller of the term of d.
func newReconciler(d membershipDeps) *reconciler {
	return &reconciler{d: d, wake: make(chan struct{}, 1)}
}

// reconcile is the controller's Reconcile.
func (r *reconciler) reconcile(ctx context.Context) error {
	step, err := r.once(ctx)
	r.d.metrics.MembershipStep(step.Step, err)
	if step.learner {
		r.d.clock.AfterFunc(LearnerObserveEvery, func() {
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

// once observes, plans and applies one step. A step that starts a join
// (it only journals the operation) is followed in the same pass by the
// operation's first step, planned on the same observation with the new
// operation active: the learner is added without waiting for a second
// observation, which would see the same cluster one journal write later.
// Node liveness is published before the steps, or with the first.
func (r *reconciler) once(ctx context.Context) (pass, error) {
	start := r.d.now()
	obs, err := observe(ctx, r.d.st, r.d.admin.Observe)
	if err != nil {
		return pass{}, err
	}
	observed := r.d.now()
	p := pass{learner: slices.ContainsFunc(obs.Members, func(m membership.Member) bool { return m.Learner })}
	now := r.d.now()
	ec, err := r.d.ensureCluster(ctx, obs, now)
	if err != nil {
		return p, err
	}
	obs.Cluster = ec.Spec
	live := r.d.live.update(now, r.d.gossip, obs.Observed)
	r.d.metrics.MembershipPass(obs.Observed, live, now)
	if r.d.gossip != nil {
		// Without gossip the planner keeps to members' own health: a
		// lapsed lease alone is not taken as a dead member.
		obs.Liveness = live
	}
	pol := policyOf(ec.Spec.Policy, r.d.policy)
	// Before the step, from what this pass observed: a learner the step
	// adds publishes its own values (executor.learnerAdded).
	if err := r.d.syncExternalStarts(ctx, obs); err != nil {
		return p, err
	}
	step := membership.Plan(obs.Observed, pol, now)
	r.d.slots.set("membership", membershipWant(obs.Observed, pol, now, step))
	// Liveness is published before any step planned from it is applied:
	// the record a successor and every observer read must never lag a
	// change made on its account (no change while a voter is suspect, as
	// the record says). When the step's first side effect is its journal
	// write, the record goes first in that transaction, at the same
	// revision, one raft round less on the way to a join's MemberAdd.
	carry, err := r.d.live.pending(r.d.name, now, live)
	if err != nil {
		return p, err
	}
	if carry != nil && !journalsFirst(step, obs.cluster) {
		r.publish(ctx, carry)
		carry = nil
	}
	err = r.apply(ctx, obs, step, now, carry)
	if err == nil && step.Action == membership.StartJoin {
		obs.Active = step.Op
		step = membership.Plan(obs.Observed, pol, now)
		err = r.apply(ctx, obs, step, now, nil)
	}
	if carry != nil && !carry.done {
		// The start failed: nothing was changed on the record's account,
		// and it is still due.
		r.publish(ctx, carry)
	}
	p.Step = step
	if err != nil {
		return p, err
	}
	r.d.log.Debug("membership pass", "action", string(step.Action), "observe", observed.Sub(start), "took", r.d.now().Sub(start))
	return p, err
}

// publish writes the liveness record by itself; a failure is logged, and
// the next pass writes it again.
func (r *reconciler) publish(ctx context.Context, c *liveCarry) {
	if err := c.write(ctx, r.d.st, r.d.fence); err != nil {
		r.d.log.Warn("publishing node liveness failed", "err", err)
	}
}

// journalsFirst tells whether step's first side effect is the transaction
// that journals its operation (executor.start): a start with no snapshot
// taken before it.
func journalsFirst(step membership.Step, ec *api.EtcdCluster) bool {
	switch step.Action {
	case membership.StartJoin, membership.StartRemove:
		return ec == nil || ec.Spec.Snapshots.BeforeChangePolicy() == api.SnapshotOff
	}
	return false
}

// apply logs step when it differs from the last one and applies it; the
// journal write of a start carries live first when it is set.
func (r *reconciler) apply(ctx context.Context, obs *observation, step membership.Step, now time.Time, live *liveCarry) error {
	if s := step.String(); s != r.last {
		lvl := r.d.log.Info
		if step.Action == membership.None {
			lvl = r.d.log.Debug
		}
		lvl("step", "action", string(step.Action), "op", opName(step), "node", step.Request, "member", step.Member.String(), "reason", step.Reason)
		r.last = s
	}
	if step.Action != membership.None {
		r.d.obs.MembershipStep(step)
	}
	if err := (&executor{d: r.d, obs: obs, now: now, live: live}).apply(ctx, step); err != nil {
		return fmt.Errorf("%s: %w", step.Action, err)
	}
	return nil
}

func opName(s membership.Step) string {
	if s.Op == nil {
		return ""
	}
	return s.Op.Metadata.Name
}

// membershipWant says what the membership controller would do with the
// one-change slot were it free, when another kind of operation holds it
// (slotwants.go); "" when it holds it itself or would do nothing.
func membershipWant(obs membership.Observed, pol membership.Policy, now time.Time, step membership.Step) string {
	if obs.Active == nil || step.Action != membership.Wait || obs.Active.Spec.Type == api.OpJoin || obs.Active.Spec.Type == api.OpRemove {
		return ""
	}
	obs.Active = nil
	if s := membership.Plan(obs, pol, now); s.Action != membership.None && s.Action != membership.Wait {
		return "membership: " + s.String()
	}
	return ""
}

package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// reconciler is the leader's loop: wait for a watch event or the resync
// tick, re-read every input, plan one step, apply it, repeat.
type reconciler struct {
	c     *Coordinator
	fence store.Fence
	last  string
}

func newReconciler(c *Coordinator, fence store.Fence) *reconciler {
	return &reconciler{c: c, fence: fence}
}

func (r *reconciler) run(ctx context.Context) error {
	return r.c.loop(ctx, "reconcile", func(ctx context.Context) (bool, error) {
		step, err := r.once(ctx)
		return step.Action != membership.None && step.Action != membership.Wait, err
	})
}

// loop is the shape of every leader loop: run once; act again at once
// while once reports that it acted, else wait for a watch event on the
// keyspace or the resync tick (level-triggered: once re-reads everything).
// A lost leadership ends the loop; other errors are logged and retried.
func (c *Coordinator) loop(ctx context.Context, what string, once func(context.Context) (acted bool, err error)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := c.store.Client().Watch(wctx, "", clientv3.WithPrefix())
	tick := time.NewTicker(c.cfg.ResyncInterval)
	defer tick.Stop()
	for {
		acted, err := once(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isNotLeader(err) {
				return err
			}
			c.log.Warn(what+" failed", "err", err)
		}
		if err == nil && acted {
			continue // the next step is usually ready
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				return fmt.Errorf("coordinator: %s watch closed", what)
			}
		case <-tick.C:
		}
	}
}

// once observes, plans and applies one step.
func (r *reconciler) once(ctx context.Context) (membership.Step, error) {
	obs, err := observe(ctx, r.c.store, r.c.admin.Observe)
	if err != nil {
		return membership.Step{}, err
	}
	now := r.c.Now()
	live := r.c.live.update(now, r.c.cfg.Gossip, obs.Observed)
	if err := r.c.live.publish(ctx, r.c.store, r.fence, r.c.cfg.Name, now, live); err != nil {
		r.c.log.Warn("publishing node liveness failed", "err", err)
	}
	if r.c.cfg.Gossip != nil {
		// Without gossip the planner keeps to members' own health: a
		// lapsed lease alone is not taken as a dead member.
		obs.Liveness = live
	}
	step := membership.Plan(obs.Observed, r.c.cfg.Policy, now)
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

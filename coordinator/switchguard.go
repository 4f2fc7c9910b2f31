package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/switchguard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// switchGuard is the leader's switch-guard controller: it answers the
// control-plane hosts' SwitchRequests (their pre-switch checks) with
// switchguard.Plan. A granted switch holds store.ActiveOpKey as an
// Operation of type OpSwitch, journaled like every other operation, so
// that a new leader resumes it: it moves leadership off the host's member
// first when that member leads, and frees the slot once the host's agent
// reports its member healthy on the new generation, or at the request's
// hold. Every write is fenced on leadership and guarded on the request as
// read (and on the slot), so an ask withdrawn or asked again meanwhile is
// planned afresh rather than overwritten.
type switchGuard struct {
	name  string
	st    *store.Store
	admin leaderMover
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	last  string
	slots *slotWants
}

// newSwitchGuard returns the switch-guard controller of the term of d.
func newSwitchGuard(d leaderDeps) *switchGuard {
	return &switchGuard{name: d.name, st: d.st, admin: d.admin, fence: d.fence, now: d.now, log: d.log, slots: d.slots}
}

// reconcile is the switch-guard controller's Reconcile (controllers.go).
func (g *switchGuard) reconcile(ctx context.Context) error {
	obs, reqs, err := g.observe(ctx)
	if err != nil {
		return err
	}
	now := g.now()
	step := switchguard.Plan(obs, now)
	g.slots.set("switch-guard", switchWant(obs, now))
	if s := step.String(); s != g.last {
		lvl := g.log.Info
		if step.Action == switchguard.None || step.Action == switchguard.Wait {
			lvl = g.log.Debug
		}
		lvl("switch guard", "action", string(step.Action), "node", step.Request, "phase", string(step.Phase), "reason", step.Reason)
		g.last = s
	}
	err = g.apply(ctx, step, reqs[step.Request], now)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, errOpBusy) {
		return nil // the write that beat this one wakes the next pass
	}
	if err != nil {
		return fmt.Errorf("switch guard: %s %s: %w", step.Action, step.Request, err)
	}
	return nil
}

func (g *switchGuard) observe(ctx context.Context) (switchguard.Observed, map[string]*api.SwitchRequest, error) {
	o, err := observe(ctx, g.st, g.admin.Observe)
	if err != nil {
		return switchguard.Observed{}, nil, err
	}
	reqs, _, err := store.List[api.SwitchRequest](ctx, g.st, store.SwitchesDir)
	if err != nil {
		return switchguard.Observed{}, nil, err
	}
	byName := map[string]*api.SwitchRequest{}
	for _, r := range reqs {
		byName[r.Metadata.Name] = r
	}
	return switchguard.Observed{Requests: reqs, Members: o.Members, Active: o.Active}, byName, nil
}

// apply carries out step; r is its request as read (nil: none).
func (g *switchGuard) apply(ctx context.Context, s switchguard.Step, r *api.SwitchRequest, now time.Time) error {
	switch s.Action {
	case switchguard.Answer:
		g.answer(r, s, now)
		return g.write(ctx, r, nil, nil)
	case switchguard.Take:
		op := api.NewOperation(s.Op)
		op.Metadata.CreatedAt = now
		op.Spec = api.OperationSpec{Type: api.OpSwitch, Node: s.Request, Request: s.Attempt, StartedBy: g.name}
		op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepSwitching, StepSince: now, Leader: g.name}
		if s.Transfer {
			op.Status.Step = api.StepTransferLeader
		}
		op.Record(now, g.name, s.Reason)
		g.answer(r, s, now)
		if s.Phase == api.SwitchGranted {
			r.Status.GrantedAt, r.Status.Deadline = now, now.Add(s.Hold)
		}
		return g.write(ctx, r, op, []store.Guard{{Cmp: store.Absent(store.ActiveOpKey), Err: errOpBusy}}, store.PutValueOp(store.ActiveOpKey, op.Metadata.Name))
	case switchguard.TransferLeader:
		if err := g.st.Leads(ctx, g.fence); err != nil {
			return err
		}
		if err := g.admin.MoveLeader(ctx, s.LeaderURL, s.To); err != nil {
			return err
		}
		op, err := g.held(ctx, s.Op)
		if err != nil {
			return err
		}
		op.Record(now, g.name, fmt.Sprintf("moved etcd leadership from %s to %s", s.Member, s.To))
		return g.write(ctx, nil, op, []store.Guard{g.holds(s.Op)})
	case switchguard.Grant:
		op, err := g.held(ctx, s.Op)
		if err != nil {
			return err
		}
		op.Status.Step, op.Status.StepSince = api.StepSwitching, now
		op.Record(now, g.name, s.Reason)
		g.answer(r, s, now)
		r.Status.GrantedAt, r.Status.Deadline = now, now.Add(s.Hold)
		return g.write(ctx, r, op, []store.Guard{g.holds(s.Op)})
	case switchguard.Release:
		op, err := g.held(ctx, s.Op)
		if err != nil {
			return err
		}
		op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
		if !s.OK {
			op.Status.Phase = api.OpFailed
		}
		op.Record(now, g.name, s.Reason)
		if r != nil && r.Spec.Attempt != s.Attempt || s.Phase == "" {
			r = nil // a new ask (or none) is not this operation's to answer
		}
		if r != nil {
			deadline := r.Status.Deadline
			g.answer(r, s, now)
			r.Status.Deadline = deadline
		}
		return g.write(ctx, r, op, []store.Guard{g.holds(s.Op)}, store.DeleteOp(store.ActiveOpKey))
	}
	return nil
}

// answer sets r's status to s's answer.
func (g *switchGuard) answer(r *api.SwitchRequest, s switchguard.Step, now time.Time) {
	granted := r.Status.GrantedAt
	if r.Status.Attempt != s.Attempt {
		granted = time.Time{}
	}
	r.Status = api.SwitchRequestStatus{Attempt: s.Attempt, Phase: s.Phase, Operation: s.Op, Message: s.Reason, GrantedAt: granted, UpdatedAt: now}
}

// held reads the journal of the operation holding the slot.
func (g *switchGuard) held(ctx context.Context, name string) (*api.Operation, error) {
	op := &api.Operation{}
	if err := g.st.Get(ctx, store.OpKey(name), op); err != nil {
		return nil, err
	}
	return op, nil
}

// holds guards a write on op still holding the slot.
func (g *switchGuard) holds(op string) store.Guard {
	return store.Guard{
		Cmp: store.ValueIs(store.ActiveOpKey, op),
		Err: fmt.Errorf("%w: switch %s no longer holds the slot", store.ErrConflict, op),
	}
}

// write puts r (guarded on its revision as read) and op with extra, in
// one transaction fenced on leadership.
func (g *switchGuard) write(ctx context.Context, r *api.SwitchRequest, op *api.Operation, guards []store.Guard, extra ...clientv3.Op) error {
	var ops []clientv3.Op
	if r != nil {
		gr, err := store.UnchangedGuard(r)
		if err != nil {
			return err
		}
		p, err := store.PutObjectOp(r)
		if err != nil {
			return err
		}
		guards, ops = append(guards, gr), append(ops, p)
	}
	if op != nil {
		p, err := store.PutObjectOp(op)
		if err != nil {
			return err
		}
		ops = append(ops, p)
	}
	_, err := g.st.FencedTxn(ctx, g.fence, guards, append(ops, extra...)...)
	return err
}

// switchWant says which host's switch would take the one-change slot were
// it free, when another kind of operation holds it (slotwants.go); "" when
// none would.
func switchWant(obs switchguard.Observed, now time.Time) string {
	if obs.Active == nil || obs.Active.Spec.Type == api.OpSwitch {
		return ""
	}
	obs.Active = nil
	if s := switchguard.Plan(obs, now); s.Action == switchguard.Take {
		return "switch of " + s.Request
	}
	return ""
}

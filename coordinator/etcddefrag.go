package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/coordinator/internal/defrag"
	"github.com/homystack/nico/coordinator/internal/etcdstatus"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/store"
)

// Defragmentation holds the one-change-in-flight slot (store.ActiveOpKey,
// an Operation of type api.OpDefrag) for the length of one member's
// Defragment call, so no membership change or rollout step runs beside it
// and no two defragmentations run at once. Under NOSPACE the store
// refuses every write, the slot's included: then no change can start at
// all, and the defragmentation that must reclaim the space runs without
// it. The call is made within the
// pass that took the slot, which releases it after; a slot found taken by
// an OpDefrag at the start of a pass was left by a term that ended
// mid-call, and is released once the member is no longer due or
// defragTimeout has passed.

// defragTimeout bounds one Defragment call.
const defragTimeout = 2 * time.Minute

// maintain disarms NOSPACE where a defragmentation reclaimed space,
// releases a slot an earlier term left, and defragments the next member
// due. changed reports a call to etcd that moved what status shows.
func (s *etcdStatuser) maintain(ctx context.Context, obs *etcdObservation) (changed bool, err error) {
	spec := obs.store.cluster.Spec
	pol := defrag.Policy{Fragmentation: spec.Policy.DefragFragmentation, MinDBSize: spec.Policy.DefragMinDBSize}
	noSpace := map[api.MemberID]bool{}
	for _, a := range obs.alarms {
		if a.Type == etcdadmin.AlarmNoSpace {
			noSpace[a.Member] = true
		}
	}
	// Kept while any NOSPACE alarm stands: a voter defragmented during the
	// episode is done for it, alarmed or not (defrag.Plan).
	if len(noSpace) == 0 {
		clear(s.defragged)
	}
	external := map[api.MemberID]bool{}
	for _, e := range spec.Members {
		for _, m := range obs.members {
			for _, u := range e.PeerURLs {
				if slices.Contains(m.PeerURLs, u) {
					external[m.ID] = true
				}
			}
		}
	}
	dobs := defrag.Observed{Members: obs.members, Alarms: obs.alarms, Leader: etcdstatus.LeaderOf(obs.members), Done: s.defragged, External: external}
	for _, id := range defrag.Disarm(dobs, s.defragged) {
		if err := s.admin.DisarmNoSpace(ctx, id); err != nil {
			return changed, err
		}
		s.log.Info("disarmed NOSPACE after defragmentation reclaimed space below the quota", "member", id)
		delete(s.defragged, id)
		dobs.Alarms = slices.DeleteFunc(slices.Clone(dobs.Alarms), func(a etcdadmin.Alarm) bool {
			return a.Member == id && a.Type == etcdadmin.AlarmNoSpace
		})
		changed = true
	}
	if op := obs.store.Active; op != nil {
		dobs.Active = op.Metadata.Name
		if op.Spec.Type == api.OpDefrag {
			s.slots.set("defragmentation", "")
			return changed, s.releaseStale(ctx, op, obs, pol)
		}
	}
	step := defrag.Plan(dobs, pol)
	s.slots.set("defragmentation", defragWant(dobs, pol))
	if step.Action != defrag.Defrag {
		s.log.Debug("defragmentation", "step", step.String())
		return changed, nil
	}
	// Leadership may have moved since the pass read the statuses: plan
	// again on fresh ones, and go on only when the same member is next.
	fresh, err := s.admin.Statuses(ctx)
	if err != nil {
		return changed, err
	}
	dobs.Members, dobs.Leader = fresh, etcdstatus.LeaderOf(fresh)
	if again := defrag.Plan(dobs, pol); again.Action != defrag.Defrag || again.Member.ID != step.Member.ID {
		s.log.Debug("defragmentation replanned on fresh statuses", "was", step.String(), "now", again.String())
		return changed, nil
	}
	ran, err := s.defragment(ctx, obs, step)
	return changed || ran, err
}

// defragment takes the slot, defragments the step's member and releases
// the slot. A slot taken meanwhile is not an error: the next pass plans
// again.
func (s *etcdStatuser) defragment(ctx context.Context, obs *etcdObservation, step defrag.Step) (bool, error) {
	m := step.Member
	if len(m.ClientURLs) == 0 {
		return false, nil
	}
	now := s.now()
	node := ""
	for _, n := range obs.store.Nodes {
		if n.Spec.PeerURL != "" && slices.Contains(m.PeerURLs, n.Spec.PeerURL) {
			node = n.Metadata.Name
		}
	}
	label := node
	if label == "" {
		label = m.Name
	}
	if label == "" {
		label = m.ID.String()
	}
	op := api.NewOperation(fmt.Sprintf("%s-defrag-%s", now.UTC().Format("20060102T150405.000000"), label))
	op.Metadata.CreatedAt = now
	op.Spec = api.OperationSpec{Type: api.OpDefrag, Node: node, MemberID: m.ID, ClientURL: m.ClientURLs[0], StartedBy: s.name}
	op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepDefragment, StepSince: now, Leader: s.name}
	op.Record(now, s.name, step.Reason)
	put, err := store.PutObjectOp(op)
	if err != nil {
		return false, err
	}
	_, err = s.st.FencedTxn(ctx, s.fence, []store.Guard{{Cmp: store.Absent(store.ActiveOpKey), Err: errOpBusy}},
		put, store.PutValueOp(store.ActiveOpKey, op.Metadata.Name))
	held := true
	switch {
	case errors.Is(err, errOpBusy):
		return false, nil
	case etcdadmin.NoSpace(err):
		// NOSPACE: etcd refuses every write, so no change can be journaled
		// and none can start; the slot is not needed, nor can it be taken.
		held = false
	case err != nil:
		return false, fmt.Errorf("taking the slot for %s: %w", op.Metadata.Name, err)
	}
	s.log.Info("defragmenting", "member", label, "op", op.Metadata.Name, "reason", step.Reason)
	s.obs.Defrag(label, true)
	start := s.now()
	derr := s.admin.Defragment(ctx, m.ClientURLs[0], defragTimeout)
	s.obs.Defrag(label, false)
	msg := fmt.Sprintf("defragmented in %s", s.now().Sub(start).Round(time.Millisecond))
	if derr != nil {
		msg = derr.Error()
	} else {
		s.defragged[m.ID] = true
	}
	if !held {
		return true, derr
	}
	// Released even when the term ends meanwhile: the fence still decides.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.release(rctx, op, derr == nil, msg); err != nil {
		return true, errors.Join(derr, err)
	}
	return true, derr
}

// releaseStale releases a defragmentation slot an earlier term left, once
// its member is no longer due (the call finished) or gone, or the call's
// timeout has passed.
func (s *etcdStatuser) releaseStale(ctx context.Context, op *api.Operation, obs *etcdObservation, pol defrag.Policy) error {
	now := s.now()
	var m *etcdadmin.MemberStatus
	for i := range obs.members {
		if obs.members[i].ID == op.Spec.MemberID {
			m = &obs.members[i]
		}
	}
	var why string
	switch {
	case m == nil:
		why = "the member left"
	case m.Reachable && defrag.Fragmentation(*m) < pol.Fragmentation:
		why = "the member is defragmented"
	case now.Sub(op.Status.StepSince) >= defragTimeout:
		why = "the call's timeout passed"
	default:
		return nil
	}
	return s.release(ctx, op, true, "released by "+s.name+" after a change of leader: "+why)
}

// release records the outcome and frees the slot, fenced and only while
// op still holds it.
func (s *etcdStatuser) release(ctx context.Context, op *api.Operation, ok bool, msg string) error {
	now := s.now()
	op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
	if !ok {
		op.Status.Phase = api.OpFailed
	}
	op.Record(now, s.name, msg)
	put, err := store.PutObjectOp(op)
	if err != nil {
		return err
	}
	_, err = s.st.FencedTxn(ctx, s.fence, []store.Guard{{
		Cmp: store.ValueIs(store.ActiveOpKey, op.Metadata.Name),
		Err: fmt.Errorf("coordinator: defragmentation %s is no longer the active operation", op.Metadata.Name),
	}}, put, store.DeleteOp(store.ActiveOpKey))
	if err != nil {
		return fmt.Errorf("releasing %s: %w", op.Metadata.Name, err)
	}
	return nil
}

// defragWant says which member's defragmentation would take the
// one-change slot were it free, when another operation holds it
// (slotwants.go); "" when none would.
func defragWant(obs defrag.Observed, pol defrag.Policy) string {
	if obs.Active == "" {
		return ""
	}
	obs.Active = ""
	if s := defrag.Plan(obs, pol); s.Action == defrag.Defrag {
		return "defragmentation: " + s.String()
	}
	return ""
}

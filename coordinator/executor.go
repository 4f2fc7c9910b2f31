package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errOpBusy: another operation is active (the one-change-in-flight guard).
var errOpBusy = errors.New("coordinator: another operation is active")

// executor applies one step: side effects on etcd's membership, each made
// once a read confirms the term (leads), and the journal and request
// updates, each in a transaction fenced on leadership.
type executor struct {
	d membershipDeps
	// admin changes the membership; nil: d.admin.
	admin MemberAdmin
	obs   *observation
	now   time.Time
	// live, when set, is the liveness record that the journal write of a
	// start carries as its first operation (reconciler.once).
	live *liveCarry
}

// leads confirms the term before a change to etcd's membership or its
// leadership, which no transaction can fence (store.Leads): a leader
// paused past its session's end changes nothing it planned in that term.
func (x *executor) leads(ctx context.Context) error {
	return x.d.st.Leads(ctx, x.d.fence)
}

// members is the MemberAdmin the executor calls.
func (x *executor) members() MemberAdmin {
	if x.admin != nil {
		return x.admin
	}
	return x.d.admin
}

func (x *executor) apply(ctx context.Context, s membership.Step) error {
	if s.Nudge {
		x.nudge(ctx, s)
	}
	switch s.Action {
	case membership.None, membership.Wait:
		return nil
	case membership.StartJoin:
		note, held, err := x.snapshotBefore(ctx, s)
		if err != nil || held {
			return err
		}
		return x.start(ctx, s.Op, nil, note)
	case membership.StartRemove:
		note, held, err := x.snapshotBefore(ctx, s)
		if err != nil || held {
			return err
		}
		if s.Op.Spec.External {
			return x.start(ctx, s.Op, nil, note)
		}
		r := x.removal(s.Request)
		r.Status = api.RemoveRequestStatus{Phase: api.RemoveRunning, Operation: s.Op.Metadata.Name, UpdatedAt: x.now}
		if err := x.start(ctx, s.Op, r, note); err != nil {
			return err
		}
		failpoint.Hit(failpoint.CoordAfterJournalRemoval)
		return nil
	case membership.AddLearner:
		return x.addLearner(ctx, s)
	case membership.AdoptLearner:
		return x.learnerAdded(ctx, s, s.Member, membership.InitialCluster(x.obs.Members, s.Member, memberName(s)))
	case membership.Promote:
		return x.promote(ctx, s)
	case membership.FinishJoin:
		return x.finishJoin(ctx, s)
	case membership.MarkStandby:
		j := x.obs.joins[s.Request]
		if j == nil {
			return nil
		}
		j.Status.Standby, j.Status.Message, j.Status.UpdatedAt = true, s.Reason, x.now
		return x.commit(ctx, nil, j)
	case membership.AbortJoin:
		if s.Member != 0 {
			if err := x.leads(ctx); err != nil {
				return err
			}
			if err := x.members().Remove(ctx, s.Member); err != nil {
				return err
			}
		}
		return x.failOp(ctx, s)
	case membership.FailOp:
		return x.failOp(ctx, s)
	case membership.FileRemoval:
		// A request, not a decision: the planner takes it through the
		// usual removal checks on its next pass.
		var err error
		if s.Standby {
			_, err = requests.RequestStandby(ctx, x.d.st, s.Request, x.d.name+": "+s.Reason)
		} else {
			_, err = requests.RequestRemoval(ctx, x.d.st, s.Request, false, x.d.name+": "+s.Reason)
		}
		if errors.Is(err, requests.ErrRemovalPending) {
			return nil
		}
		return err
	case membership.RefuseRemove:
		r := x.removal(s.Request)
		r.Status = api.RemoveRequestStatus{Phase: api.RemoveRefused, Message: s.Reason, UpdatedAt: x.now}
		return x.commit(ctx, nil, r)
	case membership.TransferLeader:
		if err := x.leads(ctx); err != nil {
			return err
		}
		if err := x.members().MoveLeader(ctx, s.LeaderURL, s.To); err != nil {
			return err
		}
		x.sideEffectDone(s)
		s.Op.Status.Step = api.StepTransferLeader
		s.Op.Record(x.now, x.d.name, fmt.Sprintf("moved etcd leadership from %s to %s", s.Member, s.To))
		s.Op.Status.Step = api.StepRemoveMember
		return x.commit(ctx, nil, s.Op)
	case membership.RemoveMember:
		// Journal first: the removal may cut this client's own endpoint.
		s.Op.Record(x.now, x.d.name, fmt.Sprintf("removing member %s", s.Member))
		if err := x.commit(ctx, nil, s.Op); err != nil {
			return err
		}
		failpoint.Hit(failpoint.CoordBeforeMemberRemove)
		if err := x.leads(ctx); err != nil {
			return err
		}
		if err := x.members().Remove(ctx, s.Member); err != nil {
			return err
		}
		failpoint.Hit(failpoint.CoordAfterMemberRemove)
		x.sideEffectDone(s)
		// Drop the removed member's endpoint from this client at once.
		if err := x.d.st.Client().Sync(ctx); err != nil {
			x.d.log.Debug("endpoint sync after removal", "err", err)
		}
		return nil
	case membership.FinishRemove:
		return x.finishRemove(ctx, s)
	case membership.RecordExternal:
		_, err := x.d.st.FencedTxn(ctx, x.d.fence, nil, recordExternalOp(s.External, s.PeerURL))
		return err
	case membership.ForgetExternal:
		_, err := x.d.st.FencedTxn(ctx, x.d.fence, nil, forgetExternalOp(s.External))
		return err
	default:
		return fmt.Errorf("coordinator: no executor for action %q", s.Action)
	}
}

// start journals a new operation, with note (the snapshot taken before
// it) when set; it fails if another is active.
func (x *executor) start(ctx context.Context, op *api.Operation, extra api.Object, note string) error {
	op.Spec.StartedBy = x.d.name
	op.Status.Leader = x.d.name
	if note != "" {
		op.Record(x.now, x.d.name, note)
	}
	op.Record(x.now, x.d.name, "started")
	put, err := store.PutObjectOp(op)
	if err != nil {
		return err
	}
	var ops []clientv3.Op
	if x.live != nil {
		ops = append(ops, x.live.op)
	}
	ops = append(ops, put, store.PutValueOp(store.ActiveOpKey, op.Metadata.Name))
	if extra != nil {
		p, err := store.PutObjectOp(extra)
		if err != nil {
			return err
		}
		ops = append(ops, p)
	}
	if _, err = x.d.st.FencedTxn(ctx, x.d.fence, []store.Guard{{Cmp: store.Absent(store.ActiveOpKey), Err: errOpBusy}}, ops...); err != nil {
		return err
	}
	if x.live != nil {
		x.live.written()
	}
	return nil
}

func (x *executor) addLearner(ctx context.Context, s membership.Step) error {
	if err := x.leads(ctx); err != nil {
		return err
	}
	id, initial, err := x.members().AddLearner(ctx, memberName(s), s.Op.Spec.PeerURL)
	if err != nil {
		return err
	}
	failpoint.Hit(failpoint.CoordAfterMemberAdd)
	x.sideEffectDone(s)
	if err := x.learnerAdded(ctx, s, id, initial); err != nil {
		return err
	}
	failpoint.Hit(failpoint.CoordAfterJournalLearner)
	return nil
}

// learnerAdded journals the learner and hands the node its initial cluster.
func (x *executor) learnerAdded(ctx context.Context, s membership.Step, id api.MemberID, initial string) error {
	op := s.Op
	op.Spec.MemberID = id
	op.Status.Step = api.StepLearner
	op.Status.StepSince = x.now
	op.Record(x.now, x.d.name, fmt.Sprintf("learner %s added", id))
	if op.Spec.External {
		// The record goes with the journal: from now on the member is
		// known as nico's to remove should it leave the spec.
		if err := x.commitWith(ctx, nil, []clientv3.Op{recordExternalOp(op.Spec.Node, op.Spec.PeerURL)}, op); err != nil {
			return err
		}
		return x.d.publishExternalStart(ctx, membership.ExternalStart(op.Spec.Node, initial))
	}
	objs := []api.Object{op}
	if j := x.obs.joins[s.Request]; j != nil {
		j.Status = api.JoinRequestStatus{Phase: api.JoinLearnerAdded, MemberID: id, InitialCluster: initial, Operation: op.Metadata.Name, UpdatedAt: x.now}
		objs = append(objs, j)
	}
	return x.commit(ctx, nil, objs...)
}

// promote promotes the learner as soon as etcd accepts it, watching its
// progress meanwhile; the progress seen is journaled either way, so that a
// learner that stops catching up is found out.
func (x *executor) promote(ctx context.Context, s membership.Step) error {
	op := s.Op
	before := op.Status.LearnerIndex
	pctx, cancel := context.WithTimeout(ctx, x.stepBound())
	defer cancel()
	if !op.Spec.External && op.Spec.Node != "" {
		wakes, stop := x.d.keyWakes(pctx, store.NodeKey(op.Spec.Node))
		defer stop()
		pctx = etcdadmin.TryAgainOn(pctx, wakes)
	}
	failpoint.Hit(failpoint.CoordBeforePromote)
	if err := x.leads(ctx); err != nil {
		return err
	}
	err := x.members().Promote(pctx, s.Voters, s.Member, s.LearnerURL, s.LeaderURL, func(idx uint64) {
		if idx > op.Status.LearnerIndex {
			op.Status.LearnerIndex = idx
			op.Status.ProgressAt = x.d.now()
		}
	})
	if err != nil {
		if op.Status.LearnerIndex > before {
			op.Record(x.d.now(), x.d.name, fmt.Sprintf("learner at raft index %d", op.Status.LearnerIndex))
			if cerr := x.commit(ctx, nil, op); cerr != nil {
				return errors.Join(err, cerr)
			}
		}
		if ctx.Err() == nil && pctx.Err() != nil {
			return nil // not ready within this step: plan again
		}
		return err
	}
	failpoint.Hit(failpoint.CoordAfterPromote)
	x.sideEffectDone(s)
	op.Record(x.d.now(), x.d.name, fmt.Sprintf("learner %s promoted", s.Member))
	return x.commit(ctx, nil, op)
}

// stepBound caps how long one step may block the loop.
func (x *executor) stepBound() time.Duration {
	d := x.d.policy.LearnerProgressTimeout / 2
	if d > 10*time.Second {
		d = 10 * time.Second
	}
	if d < time.Second {
		d = time.Second
	}
	return d
}

func (x *executor) finishJoin(ctx context.Context, s membership.Step) error {
	var objs []api.Object
	if j := x.obs.joins[s.Request]; j != nil {
		j.Status.Phase = api.JoinJoined
		j.Status.MemberID = s.Member
		j.Status.Message = "member is a voter"
		j.Status.UpdatedAt = x.now
		objs = append(objs, j)
	}
	if s.Op == nil {
		return x.commit(ctx, nil, objs...)
	}
	s.Op.Status.Phase = api.OpSucceeded
	s.Op.Status.Step = api.StepDone
	s.Op.Record(x.now, x.d.name, "member "+s.Member.String()+" is a voter")
	return x.commit(ctx, s.Op, append(objs, s.Op)...)
}

func (x *executor) failOp(ctx context.Context, s membership.Step) error {
	op := s.Op
	op.Status.Phase = api.OpFailed
	op.Record(x.now, x.d.name, s.Reason)
	objs := []api.Object{op}
	switch op.Spec.Type {
	case api.OpJoin:
		if j := x.obs.joins[s.Request]; j != nil {
			j.Status = api.JoinRequestStatus{Phase: api.JoinFailed, Retry: s.Retry, Operation: op.Metadata.Name, Message: s.Reason, MemberID: s.Member, UpdatedAt: x.now}
			objs = append(objs, j)
		}
	case api.OpRemove:
		if r := x.obs.removals[s.Request]; r != nil {
			r.Status = api.RemoveRequestStatus{Phase: api.RemoveFailed, Operation: op.Metadata.Name, Message: s.Reason, UpdatedAt: x.now}
			objs = append(objs, r)
		}
	}
	return x.commit(ctx, op, objs...)
}

func (x *executor) finishRemove(ctx context.Context, s membership.Step) error {
	op := s.Op
	op.Status.Phase = api.OpSucceeded
	op.Status.Step = api.StepDone
	if op.Spec.External {
		// No node, request or identity goes with an external member.
		op.Record(x.now, x.d.name, "external member "+op.Spec.Node+" removed")
		return x.commitWith(ctx, op, []clientv3.Op{forgetExternalOp(op.Spec.Node)}, op)
	}
	op.Record(x.now, x.d.name, "node "+op.Spec.Node+" removed")
	objs := []api.Object{op}
	if r := x.obs.removals[s.Request]; r != nil {
		r.Status = api.RemoveRequestStatus{Phase: api.RemoveDone, Operation: op.Metadata.Name, Message: "member removed; the node wipes its data", UpdatedAt: x.now}
		if !x.obs.Alive[op.Spec.Node] {
			// No agent is there to record its leaving: take its etcd
			// identity now, before Done shows, so that a machine
			// restarting on Done never races the revocation
			// (coordinator/revoke.go does it for a live agent).
			if err := rbac.RemoveNode(ctx, x.d.st.Client().Auth, op.Spec.Node); err != nil {
				return err
			}
			r.Status.IdentityRevokedAt = x.now
			x.d.log.Info("removed node's etcd identity deleted; its certificate reaches nothing now", "node", op.Spec.Node, "user", rbac.NodeRole(op.Spec.Node), "heartbeat", false)
		}
		objs = append(objs, r)
	}
	// A removed node must not rejoin by a stale request: its join request
	// goes in the transaction that shows Done. Deleted after it, the
	// delete could land on the request of the node's next life (an agent
	// that sees Done wipes its data, is started again and files anew at
	// once).
	return x.commitWith(ctx, op, []clientv3.Op{store.DeleteOp(store.JoinKey(op.Spec.Node))}, objs...)
}

// commit writes objs fenced on leadership; when closing is set it also
// releases the active-operation slot, guarded on still holding it.
func (x *executor) commit(ctx context.Context, closing *api.Operation, objs ...api.Object) error {
	return x.commitWith(ctx, closing, nil, objs...)
}

// commitWith is commit with extra operations in the same transaction.
func (x *executor) commitWith(ctx context.Context, closing *api.Operation, extra []clientv3.Op, objs ...api.Object) error {
	ops := slices.Clone(extra)
	for _, o := range objs {
		p, err := store.PutObjectOp(o)
		if err != nil {
			return err
		}
		ops = append(ops, p)
	}
	var guards []store.Guard
	if closing != nil {
		ops = append(ops, store.DeleteOp(store.ActiveOpKey))
		guards = append(guards, store.Guard{
			Cmp: store.ValueIs(store.ActiveOpKey, closing.Metadata.Name),
			Err: fmt.Errorf("coordinator: operation %s is no longer the active one", closing.Metadata.Name),
		})
	}
	_, err := x.d.st.FencedTxn(ctx, x.d.fence, guards, ops...)
	return err
}

func (x *executor) removal(name string) *api.RemoveRequest {
	if r := x.obs.removals[name]; r != nil {
		return r
	}
	return api.NewRemoveRequest(name)
}

func isNotLeader(err error) bool { return errors.Is(err, store.ErrNotLeader) }

// sideEffectDone tells the observer that etcd accepted s's change and the
// journal does not record it yet.
func (x *executor) sideEffectDone(s membership.Step) {
	x.d.obs.MembershipChanged(s)
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// msgWaitLearner is a joining node's status message until its learner is
// added.
const msgWaitLearner = "waiting for the coordinator to add this node as a learner"

// joinCluster follows this node's join request (filed or resumed, with the
// reading it was filed on, by registerAndRequest; nil: it files or
// resumes one itself) and the leader's answer: start the learner when it
// is added, wipe and file again when the join failed, return once the
// member is a voter. Every wake re-reads the request, the node's removal
// request and the cluster's etcd version in one transaction.
func (a *Agent) joinCluster(ctx context.Context, v *joinView) error {
	stopExtend := a.extendWhileJoining(ctx) // agent/progress.go
	defer func() { stopExtend() }()
	defer a.state.setStandby(false)
	stopStandby := func() {}
	defer func() { stopStandby() }()
	if id, lost := a.lostVoter(ctx); lost {
		return a.removeLost(ctx, id)
	}
	a.status("joining the etcd cluster")
	if v == nil {
		// The request first: the leader acts on it at once, and the phase
		// written after it is not on the way.
		read, err := a.readJoin(ctx)
		if err != nil {
			return err
		}
		if read.join, err = a.currentJoin(ctx, read.join); err != nil {
			return err
		}
		v = &read
	}
	req := v.join
	a.node.setPhaseIfChanged(ctx, api.NodeJoining, msgWaitLearner)
	events := watchKey(ctx, a.client(), store.Key(store.JoinKey(a.cfg.Name)))
	defer events.Stop()
	tick := time.NewTicker(a.cfg.RetryInterval)
	defer tick.Stop()
	for {
		if v.removalDone() {
			return a.removed(ctx, "removed while joining")
		}
		if req.Status.Phase == api.JoinPending && req.Status.Standby && !a.state.inStandby() {
			stopExtend() // started: no more start time to ask for
			stopExtend = func() {}
			stopStandby = a.becomeStandby(ctx, req)
		}
		done, err := a.followJoin(ctx, req, v.version)
		if errors.Is(err, member.ErrRemoved) {
			return a.removed(ctx, "the cluster removed this member while it joined")
		}
		if done || err != nil {
			return err
		}
		var memberDone <-chan struct{}
		if a.state.memberRunning() {
			memberDone = a.runtime.Done()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-events.C:
		case <-tick.C:
		case <-memberDone:
			if errors.Is(a.runtime.Err(), member.ErrRemoved) {
				return a.removed(ctx, "the cluster removed this member while it joined")
			}
			a.state.memberGone()
			a.log.Warn("member exited while joining; it will be started again", "err", a.runtime.Err())
		}
		next, err := a.readJoin(ctx)
		if err != nil {
			a.log.Warn("read join request", "err", err)
			continue
		}
		v = &next
		if next.join == nil {
			if v.removalDone() {
				return a.removed(ctx, "removed while joining")
			}
			if v.join, err = a.fileJoin(ctx, req.Spec.Attempt+1); err != nil {
				return err
			}
		}
		req = v.join
	}
}

// registerAndRequest registers the node and, on a joining node, clears a
// finished removal of it and files (or resumes) its join request: a
// machine the store has never seen in one transaction (fileFirst);
// otherwise one read of the node and its requests, then the node and a
// new request in one transaction (the leader sees both at one revision).
func (a *Agent) registerAndRequest(ctx context.Context, joining bool) (*joinView, error) {
	if !joining {
		if err := a.node.register(ctx); err != nil {
			return nil, err
		}
		a.clearFinishedRemoval(ctx)
		return nil, nil
	}
	v, done, err := a.fileFirst(ctx)
	if err != nil {
		return nil, err
	}
	if done {
		return &v, nil
	}
	n := a.node.object(v.node)
	put, err := store.PutOp(store.NodeKey(a.cfg.Name), n)
	if err != nil {
		return nil, fmt.Errorf("agent: register: %w", err)
	}
	ops := append([]clientv3.Op{put}, a.node.heartbeatOps()...)
	if v.removal != nil && v.removal.Status.Phase.Finished() {
		// In the transaction that registers the node again: a removal
		// left behind would end the join it files ("removed while joining").
		a.log.Info("clearing a finished removal request of this node", "phase", v.removal.Status.Phase)
		ops = append(ops, store.DeleteOp(store.RemovalKey(a.cfg.Name)))
		v.removal = nil
	}
	var filed *api.JoinRequest
	if a.resumable(ctx, v.join) {
		a.log.Info("resuming join request", "attempt", v.join.Spec.Attempt, "phase", v.join.Status.Phase)
	} else {
		filed = a.newJoin(nextAttempt(v.join))
		p, err := store.PutOp(store.JoinKey(a.cfg.Name), filed)
		if err != nil {
			return nil, fmt.Errorf("agent: file join request: %w", err)
		}
		ops = append(ops, p)
	}
	resp, err := a.store().Txn(ctx, nil, ops...)
	if err != nil {
		return nil, fmt.Errorf("agent: register and file join request: %w", err)
	}
	n.Metadata.Revision = resp.Header.Revision
	a.node.registered(n)
	if filed != nil {
		filed.Metadata.Revision = resp.Header.Revision
		a.log.Info("join requested", "attempt", filed.Spec.Attempt)
		v.join = filed
	}
	return &v, nil
}

// currentJoin resumes old, the request read for this node (nil: none),
// when it is for this peer URL and still under way (an agent restarted
// mid-join), or files a new one.
func (a *Agent) currentJoin(ctx context.Context, old *api.JoinRequest) (*api.JoinRequest, error) {
	if a.resumable(ctx, old) {
		a.log.Info("resuming join request", "attempt", old.Spec.Attempt, "phase", old.Status.Phase)
		return old, nil
	}
	return a.fileJoin(ctx, nextAttempt(old))
}

// resumable tells whether old (nil: none) is this node's request, for its
// peer URL, still under way.
func (a *Agent) resumable(ctx context.Context, old *api.JoinRequest) bool {
	return old != nil && old.Spec.PeerURL == a.cfg.PeerURL &&
		(old.Status.Phase == api.JoinPending || (old.Status.Phase == api.JoinLearnerAdded && a.learnerIs(ctx, old.Status.MemberID)))
}

// nextAttempt is the attempt number of the request after old (nil: 1).
func nextAttempt(old *api.JoinRequest) int {
	if old == nil {
		return 1
	}
	return old.Spec.Attempt + 1
}

// learnerIs tells whether id is still a learner with this node's peer URL.
func (a *Agent) learnerIs(ctx context.Context, id api.MemberID) bool {
	got, _, learner, err := a.member.self(ctx)
	return err == nil && learner && got == id
}

// newJoin is a new join request of this node.
func (a *Agent) newJoin(attempt int) *api.JoinRequest {
	j := api.NewJoinRequest(a.cfg.Name)
	j.Metadata.CreatedAt = a.Now()
	j.Spec = api.JoinRequestSpec{Node: a.cfg.Name, PeerURL: a.cfg.PeerURL, ClientURL: a.cfg.ClientURL, Attempt: attempt}
	return j
}

func (a *Agent) fileJoin(ctx context.Context, attempt int) (*api.JoinRequest, error) {
	j := a.newJoin(attempt)
	if err := a.store().Put(ctx, store.JoinKey(a.cfg.Name), j); err != nil {
		return nil, fmt.Errorf("agent: file join request: %w", err)
	}
	a.log.Info("join requested", "attempt", attempt)
	return j, nil
}

// followJoin acts on one reading of the join request; version is the
// EtcdCluster's spec.version read with it ("" none). It returns done once
// the member is a voter.
func (a *Agent) followJoin(ctx context.Context, j *api.JoinRequest, version string) (bool, error) {
	switch j.Status.Phase {
	case api.JoinPending:
		return false, nil
	case api.JoinLearnerAdded:
		if a.state.memberRunning() {
			return false, nil
		}
		failpoint.Hit(failpoint.AgentBeforeLearnerStart)
		a.log.Info("added as learner; starting member", "member", j.Status.MemberID, "initialCluster", j.Status.InitialCluster)
		if version != "" {
			// Join on the version the cluster is rolled to, when the
			// runtime has it, rather than the runtime's default.
			a.member.useVersion(version, "the EtcdCluster's spec.version")
		}
		err := a.member.launch(ctx, j.Status.InitialCluster, "existing")
		if err == nil {
			// At once: a learner serves only once it caught up with the
			// leader, and the leader, which watches the node, then tries
			// its promotion (coordinator/promote_wake.go). The marker
			// follows.
			a.node.setPhase(ctx, api.NodeJoining, "learner started; waiting for promotion")
			err = a.member.record(ctx)
		}
		if err != nil {
			if errors.Is(err, member.ErrRemoved) {
				return false, err
			}
			// The coordinator removes a learner that never starts; keep
			// trying until it does.
			a.log.Warn("learner did not start; will retry", "err", err)
			_ = a.member.stop(ctx)
			return false, nil
		}
		return false, nil
	case api.JoinJoined:
		a.log.Info("promoted to voter", "member", j.Status.MemberID)
		return true, nil
	case api.JoinFailed:
		if !j.Status.Retry {
			return false, fmt.Errorf("agent: join refused: %s", j.Status.Message)
		}
		a.log.Warn("join failed; wiping data dir and trying again", "reason", j.Status.Message, "attempt", j.Spec.Attempt)
		if _, err := a.member.stopAndWipe(ctx); err != nil {
			return false, fmt.Errorf("agent: wipe data dir: %w", err)
		}
		next, err := a.fileJoin(ctx, j.Spec.Attempt+1)
		if err != nil {
			return false, err
		}
		*j = *next
		return false, nil
	default:
		return false, fmt.Errorf("agent: join request phase %q is not known to this agent", j.Status.Phase)
	}
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// etcdJoin takes a control-plane node into the etcd cluster: it files
// (or resumes) the node's join request, follows the leader's answer
// (start the learner once added, wipe and file again after a failed join,
// wait as a standby) and returns once the member is a voter. A node whose
// member lost its data asks for its removal first (lostVoter). Token
// enrollment, the other "join", is pkg/enroll's.
type etcdJoin struct {
	cfg     *Config
	log     *slog.Logger
	now     func() time.Time
	store   func() *store.Store
	client  func() *clientv3.Client
	member  *localMember
	node    *nodeWriter
	state   *nodeState
	removal *removal // the way out, when the node is removed while it joins
	host    joinHost
	// removedLearner is the member of this node's join that the cluster
	// removed (learnerRemoved): it is not started again.
	removedLearner api.MemberID
}

// joinHost is what a join asks of the rest of the agent.
type joinHost interface {
	// status tells the service manager what the agent does.
	status(msg string)
	// extendWhileJoining asks the service manager for more start time
	// while the join makes progress, until stop.
	extendWhileJoining(ctx context.Context) (stop func())
	// becomeStandby makes the node a standby, until stop.
	becomeStandby(ctx context.Context, req *api.JoinRequest) (stop func())
}

// run follows this node's join request (filed or resumed, with the
// reading it was filed on, by registerAndRequest; nil: it files or
// resumes one itself) and the leader's answer: start the learner when it
// is added, wipe and file again when the join failed, return once the
// member is a voter. Every wake re-reads the request, the node's removal
// request and the cluster's etcd version in one transaction.
func (e *etcdJoin) run(ctx context.Context, v *joinView) error {
	stopExtend := e.host.extendWhileJoining(ctx) // agent/progress.go
	defer func() { stopExtend() }()
	defer e.state.setStandby(false)
	stopStandby := func() {}
	defer func() { stopStandby() }()
	if id, lost := e.lostVoter(ctx); lost {
		return e.removeLost(ctx, id)
	}
	e.host.status("joining the etcd cluster")
	if v == nil {
		// The request first: the leader acts on it at once, and the phase
		// written after it is not on the way.
		read, err := e.read(ctx)
		if err != nil {
			return err
		}
		if read.join, err = e.current(ctx, read.join); err != nil {
			return err
		}
		v = &read
	}
	req := v.join
	e.node.setPhaseIfChanged(ctx, api.NodeJoining, msgWaitLearner)
	events := watchKey(ctx, e.client(), store.Key(store.JoinKey(e.cfg.Name)))
	defer events.Stop()
	tick := time.NewTicker(e.cfg.RetryInterval)
	defer tick.Stop()
	for {
		if v.removalDone() {
			return e.removal.removed(ctx, "removed while joining")
		}
		if req.Status.Phase == api.JoinPending && req.Status.Standby && !e.state.inStandby() {
			stopExtend() // started: no more start time to ask for
			stopExtend = func() {}
			stopStandby = e.host.becomeStandby(ctx, req)
		}
		done, err := e.follow(ctx, req, v.version)
		if errors.Is(err, member.ErrRemoved) {
			err = e.learnerRemoved(ctx, req)
		}
		if done || err != nil {
			return err
		}
		var memberDone <-chan struct{}
		if e.state.memberRunning() {
			memberDone = e.member.runtime.Done()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-events.C:
		case <-tick.C:
		case <-memberDone:
			if errors.Is(e.member.runtime.Err(), member.ErrRemoved) {
				if err := e.learnerRemoved(ctx, req); err != nil {
					return err
				}
				break
			}
			e.state.memberGone()
			e.log.Warn("member exited while joining; it will be started again", "err", e.member.runtime.Err())
		}
		next, err := e.read(ctx)
		if err != nil {
			e.log.Warn("read join request", "err", err)
			continue
		}
		v = &next
		if next.join == nil {
			if v.removalDone() {
				return e.removal.removed(ctx, "removed while joining")
			}
			if v.join, err = e.file(ctx, req.Spec.Attempt+1); err != nil {
				return err
			}
		}
		req = v.join
	}
}

// learnerRemoved answers the member of this attempt finding itself
// removed from the cluster. That ends the attempt, not the node: the
// leader removes a learner that did not start or stopped catching up
// within its timeouts (the member may start just after) and answers a
// learner removed outside nico the same way, with the request failed and
// to be tried again; a removal of the node itself shows as its removal
// request done, which the join loop reads next. The removed member's data
// is wiped (a copy kept) and the member is not started again: the join
// follows the leader's answer.
func (e *etcdJoin) learnerRemoved(ctx context.Context, req *api.JoinRequest) error {
	e.log.Warn("the cluster removed this join's learner; waiting for the leader's answer", "member", req.Status.MemberID, "attempt", req.Spec.Attempt)
	backup, err := e.member.stopAndWipe(ctx)
	if err != nil {
		return fmt.Errorf("agent: wipe the removed learner: %w", err)
	}
	e.removedLearner = req.Status.MemberID
	e.log.Info("data dir wiped", "copy", backup)
	return nil
}

// registerAndRequest registers the node and, on a joining node, waits
// for an earlier removal of it to finish (awaitEarlierRemoval), clears a
// finished removal of it and files (or resumes) its join request: a
// machine the store has never seen in one transaction (fileFirst);
// otherwise one read of the node and its requests, then the node and a
// new request in one transaction (the leader sees both at one revision).
func (e *etcdJoin) registerAndRequest(ctx context.Context, joining bool) (*joinView, error) {
	if !joining {
		if err := e.node.register(ctx); err != nil {
			return nil, err
		}
		e.removal.clearFinished(ctx)
		return nil, nil
	}
	v, done, err := e.fileFirst(ctx)
	if err != nil {
		return nil, err
	}
	if done {
		return &v, nil
	}
	if earlierRemoval(v) {
		if v, err = e.awaitEarlierRemoval(ctx, v); err != nil {
			return nil, err
		}
	}
	n := e.node.object(v.node)
	put, err := store.PutOp(store.NodeKey(e.cfg.Name), n)
	if err != nil {
		return nil, fmt.Errorf("agent: register: %w", err)
	}
	ops := append([]clientv3.Op{put}, e.node.heartbeatOps()...)
	if v.removal != nil && v.removal.Status.Phase.Finished() {
		// In the transaction that registers the node again: a removal
		// left behind would end the join it files ("removed while joining").
		e.log.Info("clearing a finished removal request of this node", "phase", v.removal.Status.Phase)
		ops = append(ops, store.DeleteOp(store.RemovalKey(e.cfg.Name)))
		v.removal = nil
	}
	var filed *api.JoinRequest
	if e.resumable(ctx, v.join) {
		e.log.Info("resuming join request", "attempt", v.join.Spec.Attempt, "phase", v.join.Status.Phase)
	} else {
		filed = e.newRequest(nextAttempt(v.join))
		p, err := store.PutOp(store.JoinKey(e.cfg.Name), filed)
		if err != nil {
			return nil, fmt.Errorf("agent: file join request: %w", err)
		}
		ops = append(ops, p)
	}
	resp, err := e.store().Txn(ctx, nil, ops...)
	if err != nil {
		return nil, fmt.Errorf("agent: register and file join request: %w", err)
	}
	n.Metadata.Revision = resp.Header.Revision
	e.node.registered(n)
	if filed != nil {
		filed.Metadata.Revision = resp.Header.Revision
		e.log.Info("join requested", "attempt", filed.Spec.Attempt)
		v.join = filed
	}
	return &v, nil
}

// earlierRemoval tells whether v shows a removal of this node that the
// node has carried out (its record says Removed: it stopped, wiped its
// member and left) and the leader has not yet recorded finished: the
// agent was started again in between.
func earlierRemoval(v joinView) bool {
	return v.removal != nil && !v.removal.Status.Phase.Finished() && v.node != nil && v.node.Status.Phase == api.NodeRemoved
}

// awaitEarlierRemoval waits until the leader has finished the earlier
// removal v shows (earlierRemoval) and returns the reading that shows it
// finished. A join filed meanwhile would run beside that removal, which
// ends it once done ("removed while joining"): the node would stay out.
func (e *etcdJoin) awaitEarlierRemoval(ctx context.Context, v joinView) (joinView, error) {
	e.log.Info("waiting for the leader to finish this node's earlier removal before joining again", "phase", v.removal.Status.Phase)
	e.host.status("waiting for the leader to finish this node's earlier removal")
	events := watchKey(ctx, e.client(), store.Key(store.RemovalKey(e.cfg.Name)))
	defer events.Stop()
	tick := time.NewTicker(e.cfg.RetryInterval)
	defer tick.Stop()
	for earlierRemoval(v) {
		select {
		case <-ctx.Done():
			return joinView{}, ctx.Err()
		case <-events.C:
		case <-tick.C:
		}
		next, err := e.read(ctx)
		if err != nil {
			e.log.Warn("read removal request", "err", err)
			continue
		}
		v = next
	}
	return v, nil
}

// current resumes old, the request read for this node (nil: none),
// when it is for this peer URL and still under way (an agent restarted
// mid-join), or files a new one.
func (e *etcdJoin) current(ctx context.Context, old *api.JoinRequest) (*api.JoinRequest, error) {
	if e.resumable(ctx, old) {
		e.log.Info("resuming join request", "attempt", old.Spec.Attempt, "phase", old.Status.Phase)
		return old, nil
	}
	return e.file(ctx, nextAttempt(old))
}

// resumable tells whether old (nil: none) is this node's request, for its
// peer URL, still under way.
func (e *etcdJoin) resumable(ctx context.Context, old *api.JoinRequest) bool {
	return old != nil && old.Spec.PeerURL == e.cfg.PeerURL &&
		(old.Status.Phase == api.JoinPending || (old.Status.Phase == api.JoinLearnerAdded && e.learnerIs(ctx, old.Status.MemberID)))
}

// nextAttempt is the attempt number of the request after old (nil: 1).
func nextAttempt(old *api.JoinRequest) int {
	if old == nil {
		return 1
	}
	return old.Spec.Attempt + 1
}

// learnerIs tells whether id is still a learner with this node's peer URL.
func (e *etcdJoin) learnerIs(ctx context.Context, id api.MemberID) bool {
	got, _, learner, err := e.member.self(ctx)
	return err == nil && learner && got == id
}

// newRequest is a new join request of this node.
func (e *etcdJoin) newRequest(attempt int) *api.JoinRequest {
	j := api.NewJoinRequest(e.cfg.Name)
	j.Metadata.CreatedAt = e.now()
	j.Spec = api.JoinRequestSpec{Node: e.cfg.Name, PeerURL: e.cfg.PeerURL, ClientURL: e.cfg.ClientURL, Attempt: attempt}
	return j
}

func (e *etcdJoin) file(ctx context.Context, attempt int) (*api.JoinRequest, error) {
	j := e.newRequest(attempt)
	if err := e.store().Put(ctx, store.JoinKey(e.cfg.Name), j); err != nil {
		return nil, fmt.Errorf("agent: file join request: %w", err)
	}
	e.log.Info("join requested", "attempt", attempt)
	return j, nil
}

// follow acts on one reading of the join request; version is the
// EtcdCluster's spec.version read with it ("" none). It returns done once
// the member is a voter.
func (e *etcdJoin) follow(ctx context.Context, j *api.JoinRequest, version string) (bool, error) {
	switch j.Status.Phase {
	case api.JoinPending:
		return false, nil
	case api.JoinLearnerAdded:
		if e.state.memberRunning() || j.Status.MemberID == e.removedLearner {
			return false, nil
		}
		failpoint.Hit(failpoint.AgentBeforeLearnerStart)
		e.log.Info("added as learner; starting member", "member", j.Status.MemberID, "initialCluster", j.Status.InitialCluster)
		if version != "" {
			// Join on the version the cluster is rolled to, when the
			// runtime has it, rather than the runtime's default.
			e.member.useVersion(version, "the EtcdCluster's spec.version")
		}
		err := e.member.launch(ctx, j.Status.InitialCluster, "existing")
		if err == nil {
			// At once: a learner serves only once it caught up with the
			// leader, and the leader, which watches the node, then tries
			// its promotion (coordinator/promote_wake.go). The marker
			// follows.
			e.node.setPhase(ctx, api.NodeJoining, "learner started; waiting for promotion")
			err = e.member.record(ctx)
		}
		if err != nil {
			if errors.Is(err, member.ErrRemoved) {
				return false, err
			}
			// The coordinator removes a learner that never starts; keep
			// trying until it does.
			e.log.Warn("learner did not start; will retry", "err", err)
			_ = e.member.stop(ctx)
			return false, nil
		}
		return false, nil
	case api.JoinJoined:
		e.log.Info("promoted to voter", "member", j.Status.MemberID)
		return true, nil
	case api.JoinFailed:
		if !j.Status.Retry {
			return false, fmt.Errorf("agent: join refused: %s", j.Status.Message)
		}
		e.log.Warn("join failed; wiping data dir and trying again", "reason", j.Status.Message, "attempt", j.Spec.Attempt)
		if _, err := e.member.stopAndWipe(ctx); err != nil {
			return false, fmt.Errorf("agent: wipe data dir: %w", err)
		}
		next, err := e.file(ctx, j.Spec.Attempt+1)
		if err != nil {
			return false, err
		}
		*j = *next
		return false, nil
	default:
		return false, fmt.Errorf("agent: join request phase %q is not known to this agent", j.Status.Phase)
	}
}

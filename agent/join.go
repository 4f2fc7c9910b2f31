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
)

// join files (or resumes) this node's join request and follows the
// leader's answer: start the learner when it is added, wipe and file again
// when the join failed, return once the member is a voter.
func (a *Agent) join(ctx context.Context) error {
	stopExtend := a.extendWhileJoining(ctx) // agent/progress.go
	defer func() { stopExtend() }()
	defer a.standby.Store(false)
	stopStandby := func() {}
	defer func() { stopStandby() }()
	if id, lost := a.lostVoter(ctx); lost {
		return a.removeLost(ctx, id)
	}
	a.status("joining the etcd cluster")
	// The request first: the leader acts on it at once, and the phase
	// written after it is not on the way.
	req, err := a.currentJoin(ctx)
	if err != nil {
		return err
	}
	a.setPhase(ctx, api.NodeJoining, "waiting for the coordinator to add this node as a learner")
	events := watchKey(ctx, a.cli, store.JoinKey(a.cfg.Name))
	defer events.Stop()
	tick := time.NewTicker(a.cfg.RetryInterval)
	defer tick.Stop()
	for {
		if removed, _ := a.removalDone(ctx); removed {
			return a.removed(ctx, "removed while joining")
		}
		if req.Status.Phase == api.JoinPending && req.Status.Standby && !a.standby.Load() {
			stopExtend() // started: no more start time to ask for
			stopExtend = func() {}
			stopStandby = a.becomeStandby(ctx, req)
		}
		done, err := a.followJoin(ctx, req)
		if errors.Is(err, member.ErrRemoved) {
			return a.removed(ctx, "the cluster removed this member while it joined")
		}
		if done || err != nil {
			return err
		}
		var memberDone <-chan struct{}
		if a.running.Load() {
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
			a.running.Store(false)
			a.log.Warn("member exited while joining; it will be started again", "err", a.runtime.Err())
		}
		next := &api.JoinRequest{}
		switch err := a.st.Get(ctx, store.JoinKey(a.cfg.Name), next); {
		case errors.Is(err, store.ErrNotFound):
			if removed, _ := a.removalDone(ctx); removed {
				return a.removed(ctx, "removed while joining")
			}
			req, err = a.fileJoin(ctx, req.Spec.Attempt+1)
			if err != nil {
				return err
			}
		case err != nil:
			a.log.Warn("read join request", "err", err)
		default:
			req = next
		}
	}
}

// currentJoin resumes a request for this peer URL that is still under way
// (an agent restarted mid-join), or files a new one.
func (a *Agent) currentJoin(ctx context.Context) (*api.JoinRequest, error) {
	old := &api.JoinRequest{}
	err := a.st.Get(ctx, store.JoinKey(a.cfg.Name), old)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent: read join request: %w", err)
	}
	if err == nil && old.Spec.PeerURL == a.cfg.PeerURL &&
		(old.Status.Phase == api.JoinPending || (old.Status.Phase == api.JoinLearnerAdded && a.learnerIs(ctx, old.Status.MemberID))) {
		a.log.Info("resuming join request", "attempt", old.Spec.Attempt, "phase", old.Status.Phase)
		return old, nil
	}
	return a.fileJoin(ctx, old.Spec.Attempt+1)
}

// learnerIs tells whether id is still a learner with this node's peer URL.
func (a *Agent) learnerIs(ctx context.Context, id api.MemberID) bool {
	got, _, learner, err := a.selfMember(ctx)
	return err == nil && learner && got == id
}

func (a *Agent) fileJoin(ctx context.Context, attempt int) (*api.JoinRequest, error) {
	j := api.NewJoinRequest(a.cfg.Name)
	j.Metadata.CreatedAt = a.Now()
	j.Spec = api.JoinRequestSpec{Node: a.cfg.Name, PeerURL: a.cfg.PeerURL, ClientURL: a.cfg.ClientURL, Attempt: attempt}
	if err := a.st.Put(ctx, store.JoinKey(a.cfg.Name), j); err != nil {
		return nil, fmt.Errorf("agent: file join request: %w", err)
	}
	a.log.Info("join requested", "attempt", attempt)
	return j, nil
}

// followJoin acts on one reading of the join request. It returns done once
// the member is a voter.
func (a *Agent) followJoin(ctx context.Context, j *api.JoinRequest) (bool, error) {
	switch j.Status.Phase {
	case api.JoinPending:
		return false, nil
	case api.JoinLearnerAdded:
		if a.running.Load() {
			return false, nil
		}
		failpoint.Hit(failpoint.AgentBeforeLearnerStart)
		a.log.Info("added as learner; starting member", "member", j.Status.MemberID, "initialCluster", j.Status.InitialCluster)
		a.useClusterEtcdVersion(ctx)
		if err := a.startMember(ctx, j.Status.InitialCluster, "existing"); err != nil {
			if errors.Is(err, member.ErrRemoved) {
				return false, err
			}
			// The coordinator removes a learner that never starts; keep
			// trying until it does.
			a.log.Warn("learner did not start; will retry", "err", err)
			_ = a.stopMember(ctx)
			return false, nil
		}
		a.setPhase(ctx, api.NodeJoining, "learner started; waiting for promotion")
		return false, nil
	case api.JoinJoined:
		a.log.Info("promoted to voter", "member", j.Status.MemberID)
		return true, nil
	case api.JoinFailed:
		if !j.Status.Retry {
			return false, fmt.Errorf("agent: join refused: %s", j.Status.Message)
		}
		a.log.Warn("join failed; wiping data dir and trying again", "reason", j.Status.Message, "attempt", j.Spec.Attempt)
		if _, err := a.stopAndWipe(ctx); err != nil {
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

// awaitVoter waits until the local member is a voter (a restarted learner
// is promoted by the leader; its join request says so).
func (a *Agent) awaitVoter(ctx context.Context) error {
	for {
		_, _, learner, err := a.selfMember(ctx)
		switch {
		case err == nil && !learner:
			return nil
		case err == nil && learner:
			if err := a.join(ctx); err != nil {
				return err
			}
			continue
		case errors.Is(err, errNoMember):
			return a.removed(ctx, fmt.Sprintf("the cluster has no member at %s", a.cfg.PeerURL))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.cfg.RetryInterval / 4):
		}
	}
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
)

// lostVoter tells whether a voter of the cluster has this node's peer URL
// while the node has no member data and runs no member: the member's data
// was lost (a wiped or replaced disk). Such a node must not file a join:
// the leader closes a join of a peer URL that is a voter at once ("member
// is already a voter"), and the agent would start that voter on an empty
// data dir, which etcd refuses forever.
func (e *etcdJoin) lostVoter(ctx context.Context) (api.MemberID, bool) {
	if e.state.memberRunning() {
		return 0, false
	}
	has, err := member.HasData(e.cfg.DataDir)
	if err != nil || has {
		return 0, false
	}
	id, _, learner, err := e.member.self(ctx)
	if err != nil || learner {
		return 0, false
	}
	return id, true
}

// removeLost files the removal of this node (the leader takes it through
// its usual checks: quorum, the etcd leader) and waits until it is done;
// then the node is removed as any other (ErrRemoved): started again, it
// joins anew through a learner. A removal the leader refused or failed is
// filed again at every RetryInterval: the reason is most often passing
// (another voter not healthy yet, so removing this one would leave too
// few), and a member with no data can do nothing else.
func (e *etcdJoin) removeLost(ctx context.Context, id api.MemberID) error {
	why := fmt.Sprintf("member %s at this node's peer URL %s lost its data (no member data in %s)", id, e.cfg.PeerURL, e.cfg.DataDir)
	e.log.Warn("this node's member lost its data; requesting its removal, then the node joins anew", "member", id, "dataDir", e.cfg.DataDir)
	e.host.status("member lost its data; waiting for its removal")
	file := func() error {
		if _, err := requests.RequestRemoval(ctx, e.store(), e.cfg.Name, false, e.cfg.Name+": "+why); err != nil && !errors.Is(err, requests.ErrRemovalPending) {
			return fmt.Errorf("agent: request the removal of lost member %s: %w", id, err)
		}
		return nil
	}
	if err := file(); err != nil {
		return err
	}
	tick := time.NewTicker(e.cfg.RetryInterval)
	defer tick.Stop()
	lastRefusal := ""
	for {
		r := &api.RemoveRequest{}
		err := e.store().Get(ctx, store.RemovalKey(e.cfg.Name), r)
		switch {
		case err == nil && r.Status.Phase == api.RemoveDone:
			return e.removal.removed(ctx, why)
		case err == nil && r.Status.Phase.Finished(), errors.Is(err, store.ErrNotFound):
			if err == nil && r.Status.Message != lastRefusal {
				lastRefusal = r.Status.Message
				e.log.Info("the removal of this node's lost member was not done; filing it again", "phase", string(r.Status.Phase), "reason", r.Status.Message)
				e.host.status("member lost its data; its removal was refused (" + r.Status.Message + "); asking again")
			}
			if err := file(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

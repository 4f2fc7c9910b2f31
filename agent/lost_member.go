package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/requests"
)

// lostVoter tells whether a voter of the cluster has this node's peer URL
// while the node has no member data and runs no member: the member's data
// was lost (a wiped or replaced disk). Such a node must not file a join:
// the leader closes a join of a peer URL that is a voter at once ("member
// is already a voter"), and the agent would start that voter on an empty
// data dir, which etcd refuses forever.
func (a *Agent) lostVoter(ctx context.Context) (api.MemberID, bool) {
	if a.running.Load() {
		return 0, false
	}
	has, err := member.HasData(a.cfg.DataDir)
	if err != nil || has {
		return 0, false
	}
	id, _, learner, err := a.selfMember(ctx)
	if err != nil || learner {
		return 0, false
	}
	return id, true
}

// removeLost files the removal of this node (the leader takes it through
// its usual checks: quorum, the etcd leader) and waits until it is done;
// then the node is removed as any other (ErrRemoved): started again, it
// joins anew through a learner.
func (a *Agent) removeLost(ctx context.Context, id api.MemberID) error {
	why := fmt.Sprintf("member %s at this node's peer URL %s lost its data (no member data in %s)", id, a.cfg.PeerURL, a.cfg.DataDir)
	a.log.Warn("this node's member lost its data; requesting its removal, then the node joins anew", "member", id, "dataDir", a.cfg.DataDir)
	a.status("member lost its data; waiting for its removal")
	if _, err := requests.RequestRemoval(ctx, a.st, a.cfg.Name, false, a.cfg.Name+": "+why); err != nil && !errors.Is(err, requests.ErrRemovalPending) {
		return fmt.Errorf("agent: request the removal of lost member %s: %w", id, err)
	}
	tick := time.NewTicker(a.cfg.RetryInterval)
	defer tick.Stop()
	for {
		if done, _ := a.removalDone(ctx); done {
			return a.removed(ctx, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

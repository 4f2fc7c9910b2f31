package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/backoff"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// supervise keeps the node in the fleet: it restarts a member that crashed,
// leaves when the node was removed, and stops when a generation brought a
// new agent (agent/upgrade.go).
func (a *Agent) supervise(ctx context.Context, hbDone <-chan struct{}) error {
	removals := watchKey(ctx, a.cli, store.RemovalKey(a.cfg.Name))
	defer removals.Stop()
	b := backoff.Backoff{Base: time.Second, Max: 30 * time.Second, Factor: 2, Jitter: 0.3}
	crashes := 0
	certs := time.NewTicker(nodeCertCheckInterval)
	defer certs.Stop()
	for {
		if done, err := a.removalDone(ctx); err == nil && done {
			return a.removed(ctx, "removal request done")
		}
		var memberDone <-chan struct{}
		if a.running {
			memberDone = a.runtime.Done()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-hbDone:
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("agent: heartbeat stopped")
		case <-a.upgrade:
			return ErrUpgraded
		case <-removals.C:
		case <-certs.C:
			a.publishNodeCert(ctx)
		case <-memberDone:
			err := a.runtime.Err()
			if errors.Is(err, member.ErrRemoved) {
				return a.removed(ctx, "the cluster removed this member")
			}
			a.running = false
			a.healthy.Store(false)
			a.log.Error("member exited; restarting it", "err", err, "crashes", crashes+1)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.Delay(crashes)):
			}
			crashes++
			if err := a.startMember(ctx, "", "existing"); err != nil {
				a.log.Error("restart member", "err", err)
				continue
			}
			a.healthy.Store(true)
		}
	}
}

func (a *Agent) removalDone(ctx context.Context) (bool, error) {
	r := &api.RemoveRequest{}
	if err := a.st.Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil {
		return false, err
	}
	return r.Status.Phase == api.RemoveDone, nil
}

// removed stops and wipes the member and records the node as removed. The
// finished removal request stays as the record; the agent clears it when it
// is started again, and then rejoins anew.
func (a *Agent) removed(ctx context.Context, why string) error {
	a.healthy.Store(false)
	a.log.Warn("node removed from the cluster; wiping member data", "why", why)
	if !a.controlPlane() {
		if err := a.stopMember(ctx); err != nil {
			a.log.Warn("stop member", "err", err)
		}
	} else {
		backup, err := a.stopAndWipe(ctx)
		if err != nil {
			return fmt.Errorf("agent: wipe after removal: %w", err)
		}
		a.log.Info("data dir wiped", "copy", backup)
	}
	// The local member is gone; reach the cluster through the others.
	if err := a.connectOthers(); err == nil {
		a.nodeMu.Lock()
		a.node.Status.MemberID, a.node.Status.MemberState = 0, api.MemberNone
		a.nodeMu.Unlock()
		a.setPhase(ctx, api.NodeRemoved, why)
		a.release(ctx) // onRemoveFlake, agent/generation.go
		// Last: with the heartbeat gone the leader deletes this node's etcd
		// identity (coordinator/revoke.go), and nothing above could write.
		_ = a.st.Delete(ctx, store.HeartbeatKey(a.cfg.Name))
	} else {
		a.log.Warn("cannot record the removal", "err", err)
	}
	return ErrRemoved
}

// connectOthers reconnects the store client to the cluster's other members.
func (a *Agent) connectOthers() error {
	var eps []string
	for _, e := range append(a.cli.Endpoints(), a.cfg.Endpoints...) {
		if e != a.cfg.ClientURL && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	a.cli.Close()
	a.cli = nil
	a.cfg.Endpoints = eps
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.DialTimeout)
	defer cancel()
	return a.connect(ctx)
}

// clearFinishedRemoval drops a removal of this node that finished while the
// agent was away: the node was removed, its data wiped at start, and it now
// joins anew.
func (a *Agent) clearFinishedRemoval(ctx context.Context) {
	r := &api.RemoveRequest{}
	if err := a.st.Get(ctx, store.RemovalKey(a.cfg.Name), r); err != nil || !r.Status.Phase.Finished() {
		return
	}
	a.log.Info("clearing a finished removal request of this node", "phase", r.Status.Phase)
	_ = a.st.Delete(ctx, store.RemovalKey(a.cfg.Name))
}

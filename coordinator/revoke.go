package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
)

// DefaultRevokeRemovedAfter bounds how long a removed node whose agent
// still holds its heartbeat keeps its etcd identity.
const DefaultRevokeRemovedAfter = 10 * time.Minute

// revoker is the leader's identity-revocation controller
// (controllers.go): it takes a removed node's etcd identity away
// (rbac.RemoveNode), so that its certificate, still valid for months,
// reaches nothing. It waits for the node's agent to finish leaving first:
// the agent records the removal and its release (onRemoveFlake) with that
// identity and then drops its heartbeat.
//
//	removal Done ──▶ heartbeat gone, or Done for RevokeRemovedAfter
//	  ──▶ delete user and role node:<name> ──▶ record identityRevokedAt (fenced, CAS)
//
// A node whose heartbeat is already gone when its removal finishes has
// its identity taken then, before Done is written (executor.finishRemove).
type revoker struct {
	st    *store.Store
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// after is Config.RevokeRemovedAfter.
	after time.Duration
}

// newRevoker returns the identity-revocation controller of the term of d.
func newRevoker(d leaderDeps, after time.Duration) *revoker {
	return &revoker{st: d.st, fence: d.fence, now: d.now, log: d.log, after: after}
}

// reconcile is the identity-revocation controller's Reconcile.
func (v *revoker) reconcile(ctx context.Context) error {
	removals, _, err := store.List[api.RemoveRequest](ctx, v.st, store.RemovalsDir)
	if err != nil {
		return err
	}
	nodes, _, err := store.List[api.Node](ctx, v.st, store.NodesDir)
	if err != nil {
		return err
	}
	alive, _, err := v.st.Alive(ctx)
	if err != nil {
		return err
	}
	now := v.now()
	for _, r := range IdentitiesToRevoke(removals, nodes, alive, now, v.after) {
		node := r.Spec.Node
		if err := rbac.RemoveNode(ctx, v.st.Client().Auth, node); err != nil {
			return err
		}
		r.Status.IdentityRevokedAt = now
		if _, err := v.st.PutUnchanged(ctx, v.fence, r); err != nil {
			return err
		}
		v.log.Info("removed node's etcd identity deleted; its certificate reaches nothing now", "node", node, "user", rbac.NodeRole(node), "heartbeat", alive[node])
	}
	return nil
}

// IdentitiesToRevoke returns the finished removals whose node's etcd
// identity is still to be deleted at now: the node has no heartbeat (its
// agent finished leaving, or is dead), or the removal has been done for
// after (an agent that never lets go). A node registered again since its
// removal (a control-plane machine restarting makes its identity anew
// with its root certificate) is left alone. It is pure.
func IdentitiesToRevoke(removals []*api.RemoveRequest, nodes []*api.Node, alive map[string]bool, now time.Time, after time.Duration) []*api.RemoveRequest {
	back := map[string]time.Time{}
	for _, n := range nodes {
		if n.Status.Phase != api.NodeRemoved {
			back[n.Metadata.Name] = n.Status.UpdatedAt
		}
	}
	var out []*api.RemoveRequest
	for _, r := range removals {
		if r.Status.Phase != api.RemoveDone || !r.Status.IdentityRevokedAt.IsZero() || r.Spec.Node == "" {
			continue
		}
		if at, ok := back[r.Spec.Node]; ok && at.After(r.Status.UpdatedAt) {
			continue
		}
		if !alive[r.Spec.Node] || !now.Before(r.Status.UpdatedAt.Add(after)) {
			out = append(out, r)
		}
	}
	return out
}

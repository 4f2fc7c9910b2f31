package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// External members (EtcdCluster spec.members of kind external) have no
// node, no agent and no heartbeat: the executor's steps for them touch
// etcd's membership, the journal, the record of on-boarded members
// (store.ExternalMembersDir) and status.external, nothing else.
//
// status.external is this file's to write: the leader publishes there the
// values an external learner must start etcd with, when it is added, and
// clears them once it is promoted or gone. The rest of the EtcdCluster's
// status, and its spec, belong to others: each write is a compare-and-swap
// on the object's revision, fenced on leadership, retried on conflict with
// the object read again, and changes status.external alone.

// externalCASAttempts bounds the retries of a status.external write that
// keeps losing to other writers of the object.
const externalCASAttempts = 8

// memberName is the etcd name the step's learner starts under: the
// external member's, else the joining node's.
func memberName(s membership.Step) string {
	if s.Op != nil && s.Op.Spec.External {
		return s.Op.Spec.Node
	}
	return s.Request
}

// recordExternalOp records external member name as on-boarded at peer.
func recordExternalOp(name, peer string) clientv3.Op {
	return store.PutValueOp(store.ExternalMemberKey(name), peer)
}

// forgetExternalOp drops external member name's record.
func forgetExternalOp(name string) clientv3.Op {
	return store.DeleteOp(store.ExternalMemberKey(name))
}

// syncExternalStarts brings status.external to what the observation says
// (membership.ExternalStarts); it writes only when that differs.
func (d membershipDeps) syncExternalStarts(ctx context.Context, o *observation) error {
	if o.cluster == nil {
		return nil
	}
	want := membership.ExternalStarts(o.Observed, o.cluster.Status.External)
	if slices.Equal(want, o.cluster.Status.External) {
		return nil
	}
	return d.writeExternalStarts(ctx, func([]api.ExternalMemberStart) []api.ExternalMemberStart { return want })
}

// publishExternalStart sets external member start's entry in
// status.external, keeping the others.
func (d membershipDeps) publishExternalStart(ctx context.Context, start api.ExternalMemberStart) error {
	return d.writeExternalStarts(ctx, func(cur []api.ExternalMemberStart) []api.ExternalMemberStart {
		out := []api.ExternalMemberStart{start}
		for _, e := range cur {
			if e.Name != start.Name {
				out = append(out, e)
			}
		}
		return out
	})
}

// writeExternalStarts sets status.external to next(the stored value) by
// compare-and-swap, fenced, retrying with a fresh read on conflict.
func (d membershipDeps) writeExternalStarts(ctx context.Context, next func([]api.ExternalMemberStart) []api.ExternalMemberStart) error {
	for range externalCASAttempts {
		ec := new(api.EtcdCluster)
		if err := d.st.Get(ctx, store.EtcdClusterKey, ec); err != nil {
			return fmt.Errorf("coordinator: status.external: %w", err)
		}
		want := next(slices.Clone(ec.Status.External))
		if slices.Equal(want, ec.Status.External) {
			return nil
		}
		ec.Status.External = want
		_, err := d.st.PutUnchanged(ctx, d.fence, ec)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("coordinator: status.external: %w", err)
		}
		d.log.Info("published external members' start values", "external", len(want))
		return nil
	}
	return fmt.Errorf("coordinator: status.external: %w after %d attempts", store.ErrConflict, externalCASAttempts)
}

package agent

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// joinView is one reading of what a joining agent follows, made in one
// transaction (one round trip, one revision): its node, its join request,
// its removal request and the etcd version and database quota the
// EtcdCluster asks for.
type joinView struct {
	node       *api.Node          // nil: none
	join       *api.JoinRequest   // nil: none
	removal    *api.RemoveRequest // nil: none
	version    string             // spec.version; "": none
	quota      int64              // spec.policy.quotaBackendBytes
	hasCluster bool               // an EtcdCluster was read (version, quota)
}

// removalDone tells whether the node's removal is done.
func (v *joinView) removalDone() bool {
	return v.removal != nil && v.removal.Status.Phase == api.RemoveDone
}

// readJoin reads the joinView.
func (a *Agent) readJoin(ctx context.Context) (joinView, error) {
	sv, err := a.store().View(ctx, a.joinRanges()...)
	if err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	}
	v, err := a.decodeJoinView(sv)
	a.noteQuota(v)
	return v, err
}

// joinRanges are the keys a joinView is read from.
func (a *Agent) joinRanges() []store.Range {
	return []store.Range{
		store.Key(store.JoinKey(a.cfg.Name)),
		store.Key(store.RemovalKey(a.cfg.Name)),
		store.Key(store.EtcdClusterKey),
		store.Key(store.NodeKey(a.cfg.Name)),
	}
}

// decodeJoinView decodes the joinView from sv, a view of joinRanges.
func (a *Agent) decodeJoinView(sv *store.View) (joinView, error) {
	var v joinView
	j, r, n := &api.JoinRequest{}, &api.RemoveRequest{}, &api.Node{}
	if found, err := sv.Decode(store.JoinKey(a.cfg.Name), j); err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	} else if found {
		v.join = j
	}
	if found, err := sv.Decode(store.RemovalKey(a.cfg.Name), r); err != nil {
		return joinView{}, fmt.Errorf("agent: read removal request: %w", err)
	} else if found {
		v.removal = r
	}
	if spec, ok := clusterSpec(sv); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	if found, err := sv.Decode(store.NodeKey(a.cfg.Name), n); err != nil {
		return joinView{}, fmt.Errorf("agent: read node: %w", err)
	} else if found {
		v.node = n
	}
	return v, nil
}

// clusterSpec is the spec of the EtcdCluster sv read; ok is false when
// there is none or it does not decode.
func clusterSpec(sv *store.View) (spec api.EtcdClusterSpec, ok bool) {
	ec := &api.EtcdCluster{}
	if found, err := sv.Decode(store.EtcdClusterKey, ec); !found || err != nil {
		return spec, false
	}
	return ec.Spec, true
}

// noteQuota keeps the database quota v read from the EtcdCluster for the
// member's next start (etcd_quota.go); nothing when v read no EtcdCluster.
func (a *Agent) noteQuota(v joinView) {
	if v.hasCluster {
		a.etcd.wantQuota.Store(v.quota)
	}
}

// fileFirst registers a machine the store has never seen and files its
// first join request, with its heartbeat (heartbeatOps), in one
// transaction that holds only while the node
// has no object, no join request and no removal request, and reads the
// EtcdCluster's version along; otherwise the same transaction reads the
// joinView (done false). One round trip either way, where reading first
// and then writing takes two.
func (a *Agent) fileFirst(ctx context.Context) (v joinView, done bool, err error) {
	n, j := a.node.object(nil), a.newJoin(1)
	putNode, err := store.PutOp(store.NodeKey(a.cfg.Name), n)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register: %w", err)
	}
	putJoin, err := store.PutOp(store.JoinKey(a.cfg.Name), j)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: file join request: %w", err)
	}
	fresh := []clientv3.Cmp{store.Absent(store.NodeKey(a.cfg.Name)), store.Absent(store.JoinKey(a.cfg.Name)), store.Absent(store.RemovalKey(a.cfg.Name))}
	then := append([]clientv3.Op{putNode, putJoin}, a.node.heartbeatOps()...)
	sv, filed, err := a.store().TxnOrView(ctx, fresh, then, a.joinRanges()...)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register and file join request: %w", err)
	}
	if !filed {
		v, err := a.decodeJoinView(sv)
		a.noteQuota(v)
		return v, false, err
	}
	n.Metadata.Revision, j.Metadata.Revision = sv.Rev, sv.Rev
	a.node.registered(n)
	a.log.Info("join requested", "attempt", j.Spec.Attempt)
	v = joinView{join: j}
	if spec, ok := clusterSpec(sv); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	a.noteQuota(v)
	return v, true, nil
}

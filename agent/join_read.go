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

// read reads the joinView.
func (e *etcdJoin) read(ctx context.Context) (joinView, error) {
	sv, err := e.store().View(ctx, e.ranges()...)
	if err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	}
	v, err := e.decode(sv)
	e.noteQuota(v)
	return v, err
}

// ranges are the keys a joinView is read from.
func (e *etcdJoin) ranges() []store.Range {
	return []store.Range{
		store.Key(store.JoinKey(e.cfg.Name)),
		store.Key(store.RemovalKey(e.cfg.Name)),
		store.Key(store.EtcdClusterKey),
		store.Key(store.NodeKey(e.cfg.Name)),
	}
}

// decode decodes the joinView from sv, a view of ranges.
func (e *etcdJoin) decode(sv *store.View) (joinView, error) {
	var v joinView
	j, r, n := &api.JoinRequest{}, &api.RemoveRequest{}, &api.Node{}
	if found, err := sv.Decode(store.JoinKey(e.cfg.Name), j); err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	} else if found {
		v.join = j
	}
	if found, err := sv.Decode(store.RemovalKey(e.cfg.Name), r); err != nil {
		return joinView{}, fmt.Errorf("agent: read removal request: %w", err)
	} else if found {
		v.removal = r
	}
	if spec, ok := clusterSpec(sv); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	if found, err := sv.Decode(store.NodeKey(e.cfg.Name), n); err != nil {
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
func (e *etcdJoin) noteQuota(v joinView) {
	if v.hasCluster {
		e.member.run.wantQuota.Store(v.quota)
	}
}

// fileFirst registers a machine the store has never seen and files its
// first join request, with its heartbeat (heartbeatOps), in one
// transaction that holds only while the node
// has no object, no join request and no removal request, and reads the
// EtcdCluster's version along; otherwise the same transaction reads the
// joinView (done false). One round trip either way, where reading first
// and then writing takes two.
func (e *etcdJoin) fileFirst(ctx context.Context) (v joinView, done bool, err error) {
	n, j := e.node.object(nil), e.newRequest(1)
	putNode, err := store.PutOp(store.NodeKey(e.cfg.Name), n)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register: %w", err)
	}
	putJoin, err := store.PutOp(store.JoinKey(e.cfg.Name), j)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: file join request: %w", err)
	}
	fresh := []clientv3.Cmp{store.Absent(store.NodeKey(e.cfg.Name)), store.Absent(store.JoinKey(e.cfg.Name)), store.Absent(store.RemovalKey(e.cfg.Name))}
	then := append([]clientv3.Op{putNode, putJoin}, e.node.heartbeatOps()...)
	sv, filed, err := e.store().TxnOrView(ctx, fresh, then, e.ranges()...)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register and file join request: %w", err)
	}
	if !filed {
		v, err := e.decode(sv)
		e.noteQuota(v)
		return v, false, err
	}
	n.Metadata.Revision, j.Metadata.Revision = sv.Rev, sv.Rev
	e.node.registered(n)
	e.log.Info("join requested", "attempt", j.Spec.Attempt)
	v = joinView{join: j}
	if spec, ok := clusterSpec(sv); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	e.noteQuota(v)
	return v, true, nil
}

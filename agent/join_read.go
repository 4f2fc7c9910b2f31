package agent

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
	resp, err := a.store().Txn(ctx, nil, a.joinReadOps()...)
	if err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	}
	v, err := decodeJoinView(resp.Responses)
	a.noteQuota(v)
	return v, err
}

// joinReadOps are the reads of a joinView, in decodeJoinView's order.
func (a *Agent) joinReadOps() []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(store.JoinKey(a.cfg.Name)),
		clientv3.OpGet(store.RemovalKey(a.cfg.Name)),
		clientv3.OpGet(store.EtcdClusterKey),
		clientv3.OpGet(store.NodeKey(a.cfg.Name)),
	}
}

// decodeJoinView decodes the responses of joinReadOps.
func decodeJoinView(resps []*etcdserverpb.ResponseOp) (joinView, error) {
	one := func(i int) *mvccpb.KeyValue {
		if kvs := resps[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0]
		}
		return nil
	}
	var v joinView
	if kv := one(0); kv != nil {
		v.join = &api.JoinRequest{}
		if err := store.Decode(kv, v.join); err != nil {
			return joinView{}, fmt.Errorf("agent: read join request: %w", err)
		}
	}
	if kv := one(1); kv != nil {
		v.removal = &api.RemoveRequest{}
		if err := store.Decode(kv, v.removal); err != nil {
			return joinView{}, fmt.Errorf("agent: read removal request: %w", err)
		}
	}
	if spec, ok := clusterSpec(one(2)); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	if kv := one(3); kv != nil {
		v.node = &api.Node{}
		if err := store.Decode(kv, v.node); err != nil {
			return joinView{}, fmt.Errorf("agent: read node: %w", err)
		}
	}
	return v, nil
}

// clusterSpec is the spec of the EtcdCluster stored in kv; ok is false
// when there is none (kv nil) or it does not decode.
func clusterSpec(kv *mvccpb.KeyValue) (spec api.EtcdClusterSpec, ok bool) {
	if kv == nil {
		return spec, false
	}
	ec := &api.EtcdCluster{}
	if err := store.Decode(kv, ec); err != nil {
		return spec, false
	}
	return ec.Spec, true
}

// noteQuota keeps the database quota v read from the EtcdCluster for the
// member's next start (etcd_quota.go); nothing when v read no EtcdCluster.
func (a *Agent) noteQuota(v joinView) {
	if v.hasCluster {
		a.quotaWant.Store(v.quota)
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
	n, j := a.nodeObject(nil), a.newJoin(1)
	putNode, err := store.PutOp(store.NodeKey(a.cfg.Name), n)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register: %w", err)
	}
	putJoin, err := store.PutOp(store.JoinKey(a.cfg.Name), j)
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: file join request: %w", err)
	}
	fresh := []clientv3.Cmp{store.Absent(store.NodeKey(a.cfg.Name)), store.Absent(store.JoinKey(a.cfg.Name)), store.Absent(store.RemovalKey(a.cfg.Name))}
	then := append([]clientv3.Op{putNode, putJoin, clientv3.OpGet(store.EtcdClusterKey)}, a.heartbeatOps()...)
	resp, err := a.store().TxnElse(ctx, fresh, then, a.joinReadOps())
	if err != nil {
		return joinView{}, false, fmt.Errorf("agent: register and file join request: %w", err)
	}
	if !resp.Succeeded {
		v, err := decodeJoinView(resp.Responses)
		a.noteQuota(v)
		return v, false, err
	}
	n.Metadata.Revision, j.Metadata.Revision = resp.Header.Revision, resp.Header.Revision
	a.registered(n)
	a.log.Info("join requested", "attempt", j.Spec.Attempt)
	var ec *mvccpb.KeyValue
	if kvs := resp.Responses[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		ec = kvs[0]
	}
	v = joinView{join: j}
	if spec, ok := clusterSpec(ec); ok {
		v.version, v.quota, v.hasCluster = spec.Version, spec.Policy.QuotaBackendBytes, true
	}
	a.noteQuota(v)
	return v, true, nil
}

package agent

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// joinView is one reading of what a joining agent follows, made in one
// transaction (one round trip, one revision): its node, its join request,
// its removal request and the etcd version the EtcdCluster asks for.
type joinView struct {
	node    *api.Node          // nil: none
	join    *api.JoinRequest   // nil: none
	removal *api.RemoveRequest // nil: none
	version string             // spec.version; "": none
}

// removalDone tells whether the node's removal is done.
func (v *joinView) removalDone() bool {
	return v.removal != nil && v.removal.Status.Phase == api.RemoveDone
}

// readJoin reads the joinView.
func (a *Agent) readJoin(ctx context.Context) (joinView, error) {
	resp, err := a.st.Txn(ctx, nil,
		clientv3.OpGet(store.JoinKey(a.cfg.Name)),
		clientv3.OpGet(store.RemovalKey(a.cfg.Name)),
		clientv3.OpGet(store.EtcdClusterKey),
		clientv3.OpGet(store.NodeKey(a.cfg.Name)),
	)
	if err != nil {
		return joinView{}, fmt.Errorf("agent: read join request: %w", err)
	}
	one := func(i int) *mvccpb.KeyValue {
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
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
	if kv := one(2); kv != nil {
		ec := &api.EtcdCluster{}
		if err := store.Decode(kv, ec); err == nil {
			v.version = ec.Spec.Version
			a.quotaWant.Store(ec.Spec.Policy.QuotaBackendBytes)
		}
	}
	if kv := one(3); kv != nil {
		v.node = &api.Node{}
		if err := store.Decode(kv, v.node); err != nil {
			return joinView{}, fmt.Errorf("agent: read node: %w", err)
		}
	}
	return v, nil
}

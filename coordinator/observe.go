package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// observation is the planner's input plus what the executor needs to write
// back (the requests as read, for their revisions).
type observation struct {
	membership.Observed
	joins    map[string]*api.JoinRequest
	removals map[string]*api.RemoveRequest
	// cluster is the stored EtcdCluster, nil when there is none yet.
	cluster *api.EtcdCluster
	// rev is the store revision every object was read at.
	rev int64
}

// observe re-reads every input: members from etcd, objects from the store,
// these at one revision (readInputs). The two reads go side by side: they
// come from different sources and are never at one revision together.
func observe(ctx context.Context, st *store.Store, members func(context.Context) ([]membership.Member, error)) (*observation, error) {
	var ms []membership.Member
	var merr error
	var wg sync.WaitGroup
	wg.Go(func() { ms, merr = members(ctx) })
	o, err := readInputs(ctx, st)
	wg.Wait()
	if merr != nil {
		return nil, merr
	}
	if err != nil {
		return nil, err
	}
	membership.MatchNodes(ms, o.Nodes)
	o.Members = ms
	return o, nil
}

// readInputs reads the nodes, the requests, the heartbeats and the active
// operation in one read-only transaction, so at one revision: a pass never
// sees, say, a join request whose node it read before the node existed.
// The active operation's journal entry is read at that same revision.
func readInputs(ctx context.Context, st *store.Store) (*observation, error) {
	resp, err := st.Txn(ctx, nil,
		clientv3.OpGet(store.NodesDir, clientv3.WithPrefix()),
		clientv3.OpGet(store.JoinsDir, clientv3.WithPrefix()),
		clientv3.OpGet(store.RemovalsDir, clientv3.WithPrefix()),
		store.AliveOp(),
		clientv3.OpGet(store.ActiveOpKey),
		clientv3.OpGet(store.EtcdClusterKey),
		clientv3.OpGet(store.ExternalMembersDir, clientv3.WithPrefix()),
		clientv3.OpGet(store.MachineClaimKey(api.EtcdClaimName)),
	)
	if err != nil {
		return nil, fmt.Errorf("coordinator: observe: %w", err)
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().GetKvs() }
	o := &observation{joins: map[string]*api.JoinRequest{}, removals: map[string]*api.RemoveRequest{}, rev: resp.Header.Revision}
	if o.Nodes, err = store.Objects[api.Node](kvs(0)); err != nil {
		return nil, err
	}
	if o.Joins, err = store.Objects[api.JoinRequest](kvs(1)); err != nil {
		return nil, err
	}
	if o.Removals, err = store.Objects[api.RemoveRequest](kvs(2)); err != nil {
		return nil, err
	}
	o.Alive = store.AliveIn(kvs(3))
	o.Onboarded = store.ExternalMembersIn(kvs(6))
	if cl := kvs(7); len(cl) > 0 {
		// The VMs the cluster asked a pool for: a shrink sheds them first.
		claim := new(api.MachineClaim)
		if err := store.Decode(cl[0], claim); err != nil {
			return nil, fmt.Errorf("coordinator: observe: %w", err)
		}
		o.Claimed = map[string]bool{}
		for _, name := range claim.Spec.Machines {
			o.Claimed[name] = true
		}
	}
	for _, j := range o.Joins {
		o.joins[j.Metadata.Name] = j
	}
	for _, r := range o.Removals {
		o.removals[r.Metadata.Name] = r
	}
	if ec := kvs(5); len(ec) > 0 {
		o.cluster = new(api.EtcdCluster)
		if err := store.Decode(ec[0], o.cluster); err != nil {
			return nil, fmt.Errorf("coordinator: observe: %w", err)
		}
	}
	if active := kvs(4); len(active) > 0 {
		if o.Active, err = st.OpAt(ctx, string(active[0].Value), o.rev); err != nil {
			return nil, fmt.Errorf("coordinator: observe: %w", err)
		}
	}
	return o, nil
}

func prefixOpts() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }

package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
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
	// view holds what was read, the extra ranges a caller asked for among it.
	view *store.View
}

// observe re-reads every input: members from etcd, objects from the store,
// these at one revision (readInputs, with the caller's extra ranges). The
// two reads go side by side: they come from different sources and are
// never at one revision together.
func observe(ctx context.Context, st *store.Store, members func(context.Context) ([]membership.Member, error), extra ...store.Range) (*observation, error) {
	var ms []membership.Member
	var merr error
	var wg sync.WaitGroup
	wg.Go(func() { ms, merr = members(ctx) })
	o, err := readInputs(ctx, st, extra...)
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
// The active operation's journal entry is read at that same revision, and
// so are the extra ranges, kept in the observation's view.
func readInputs(ctx context.Context, st *store.Store, extra ...store.Range) (*observation, error) {
	claimKey := store.MachineClaimKey(api.EtcdClaimName)
	v, err := st.View(ctx, append([]store.Range{
		store.Dir(store.NodesDir),
		store.Dir(store.JoinsDir),
		store.Dir(store.RemovalsDir),
		store.DirKeys(store.HeartbeatsDir),
		store.Key(store.ActiveOpKey),
		store.Key(store.EtcdClusterKey),
		store.Dir(store.ExternalMembersDir),
		store.Key(claimKey),
	}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("coordinator: observe: %w", err)
	}
	o := &observation{joins: map[string]*api.JoinRequest{}, removals: map[string]*api.RemoveRequest{}, rev: v.Rev, view: v}
	if o.Nodes, err = store.ViewObjects[api.Node](v, store.NodesDir); err != nil {
		return nil, err
	}
	if o.Joins, err = store.ViewObjects[api.JoinRequest](v, store.JoinsDir); err != nil {
		return nil, err
	}
	if o.Removals, err = store.ViewObjects[api.RemoveRequest](v, store.RemovalsDir); err != nil {
		return nil, err
	}
	o.Alive = v.Names(store.DirKeys(store.HeartbeatsDir))
	o.Onboarded = store.ExternalMembersIn(v.KVs(store.Dir(store.ExternalMembersDir)))
	// The VMs the cluster asked a pool for: a shrink sheds them first.
	claim := new(api.MachineClaim)
	if ok, err := v.Decode(claimKey, claim); err != nil {
		return nil, fmt.Errorf("coordinator: observe: %w", err)
	} else if ok {
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
	cluster := new(api.EtcdCluster)
	if ok, err := v.Decode(store.EtcdClusterKey, cluster); err != nil {
		return nil, fmt.Errorf("coordinator: observe: %w", err)
	} else if ok {
		o.cluster = cluster
	}
	if active := v.Value(store.ActiveOpKey); active != nil {
		if o.Active, err = st.OpAt(ctx, string(active), o.rev); err != nil {
			return nil, fmt.Errorf("coordinator: observe: %w", err)
		}
	}
	return o, nil
}

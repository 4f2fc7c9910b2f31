package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// observation is the planner's input plus what the executor needs to write
// back (the requests as read, for their revisions).
type observation struct {
	membership.Observed
	joins    map[string]*api.JoinRequest
	removals map[string]*api.RemoveRequest
}

// observe re-reads every input: members from etcd, objects from the store.
func observe(ctx context.Context, st *store.Store, members func(context.Context) ([]membership.Member, error)) (*observation, error) {
	ms, err := members(ctx)
	if err != nil {
		return nil, err
	}
	nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
	if err != nil {
		return nil, err
	}
	joins, _, err := store.List[api.JoinRequest](ctx, st, store.JoinsDir)
	if err != nil {
		return nil, err
	}
	removals, _, err := store.List[api.RemoveRequest](ctx, st, store.RemovalsDir)
	if err != nil {
		return nil, err
	}
	hb, err := st.Client().Get(ctx, store.HeartbeatsDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("coordinator: heartbeats: %w", err)
	}
	o := &observation{joins: map[string]*api.JoinRequest{}, removals: map[string]*api.RemoveRequest{}}
	o.Alive = map[string]bool{}
	for _, kv := range hb.Kvs {
		o.Alive[store.Name(string(kv.Key))] = true
	}
	membership.MatchNodes(ms, nodes)
	o.Members, o.Nodes, o.Joins, o.Removals = ms, nodes, joins, removals
	for _, j := range joins {
		o.joins[j.Metadata.Name] = j
	}
	for _, r := range removals {
		o.removals[r.Metadata.Name] = r
	}
	active, err := activeOp(ctx, st)
	if err != nil {
		return nil, err
	}
	o.Active = active
	return o, nil
}

// activeOp reads the operation in flight, or nil.
func activeOp(ctx context.Context, st *store.Store) (*api.Operation, error) {
	resp, err := st.Client().Get(ctx, store.ActiveOpKey)
	if err != nil {
		return nil, fmt.Errorf("coordinator: active op: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	op := &api.Operation{}
	err = st.Get(ctx, store.OpKey(string(resp.Kvs[0].Value)), op)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("coordinator: active op %s has no journal entry", resp.Kvs[0].Value)
	}
	return op, err
}

func firstCreated() []clientv3.OpOption { return clientv3.WithFirstCreate() }

func prefixOpts() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }

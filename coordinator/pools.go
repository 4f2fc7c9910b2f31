package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/placement"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// poolController is the leader's machine-pool controller
// (controllers.go), beside the membership one: it reads the pools, the
// machine claims, machines, hypervisor reports, nodes and removal
// requests, plans with
// placement.Compute and writes the plan, each object in a transaction
// fenced on leadership and guarded on the revision it was read at. Surplus
// machines' nodes leave through the safe removal (a RemoveRequest, as
// nicoctl files) before their domains are deleted.
//
//	[event or resync] --> observe --> placement.Compute --> write (fenced, CAS)
type poolController struct {
	// name is the candidate's, named in the removals it files.
	name  string
	st    *store.Store
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// obs is told of each write of Machines (Config.Observer).
	obs Observer
}

// newPoolController returns the machine-pool controller of the term of d.
func newPoolController(d leaderDeps) *poolController {
	return &poolController{name: d.name, st: d.st, fence: d.fence, now: d.now, log: d.log, obs: d.obs}
}

// reconcile is the machine-pool controller's Reconcile.
func (p *poolController) reconcile(ctx context.Context) error {
	pl, err := p.pass(ctx)
	if err != nil {
		return fmt.Errorf("machine pools: %w", err)
	}
	if !pl.Empty() {
		p.log.Info("machine pools", "plan", pl.Counts())
	}
	return nil
}

// pass observes, plans and writes once.
func (p *poolController) pass(ctx context.Context) (placement.Plan, error) {
	in, err := observePools(ctx, p.st, p.now())
	if err != nil {
		return placement.Plan{}, err
	}
	pl := placement.Compute(in)
	return pl, p.write(ctx, pl)
}

// observePools reads everything the placement planner needs.
func observePools(ctx context.Context, st *store.Store, now time.Time) (placement.Input, error) {
	in := placement.Input{Now: now, Nodes: map[string]*api.Node{}, Removals: map[string]*api.RemoveRequest{}}
	var err error
	if in.Pools, _, err = store.List[api.MachinePool](ctx, st, store.PoolsDir); err != nil {
		return in, err
	}
	if in.Machines, _, err = store.List[api.Machine](ctx, st, store.MachinesDir); err != nil {
		return in, err
	}
	hvs, _, err := store.List[api.Hypervisor](ctx, st, store.HypervisorsDir)
	if err != nil {
		return in, err
	}
	nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
	if err != nil {
		return in, err
	}
	removals, _, err := store.List[api.RemoveRequest](ctx, st, store.RemovalsDir)
	if err != nil {
		return in, err
	}
	if in.Claims, _, err = store.List[api.MachineClaim](ctx, st, store.ClaimsDir); err != nil {
		return in, err
	}
	alive, _, err := st.Alive(ctx)
	if err != nil {
		return in, err
	}
	for _, h := range hvs {
		in.Hosts = append(in.Hosts, &placement.Host{Name: h.Metadata.Name, Alive: alive[h.Metadata.Name], Labels: h.Spec.Labels, Report: h.Status})
	}
	for _, n := range nodes {
		in.Nodes[n.Metadata.Name] = n
	}
	for _, r := range removals {
		in.Removals[r.Metadata.Name] = r
	}
	return in, nil
}

// write applies a plan. Each write is fenced on leadership and
// guarded on the object's revision; a conflict is left for the next pass.
func (p *poolController) write(ctx context.Context, pl placement.Plan) error {
	var errs []error
	// write puts obj, or deletes it, guarded on its being unchanged
	// since it was read.
	write := func(obj api.Object, op func(api.Object) (clientv3.Op, error)) error {
		guard, err := store.UnchangedGuard(obj)
		if err != nil {
			return err
		}
		o, err := op(obj)
		if err != nil {
			return err
		}
		if _, err := p.st.FencedTxn(ctx, p.fence, []store.Guard{guard}, o); err != nil && !errors.Is(err, store.ErrConflict) {
			errs = append(errs, err)
		}
		return nil
	}
	put := func(obj api.Object) (clientv3.Op, error) { return store.PutObjectOp(obj) }
	// New machines go in batches, one transaction each (a host wakes once
	// per batch, not once per machine); a batch whose names were taken
	// meanwhile is left to the next pass.
	const batch = 50
	for i := 0; i < len(pl.Create); i += batch {
		var guards []store.Guard
		var ops []clientv3.Op
		for _, m := range pl.Create[i:min(i+batch, len(pl.Create))] {
			m.Spec.UUID = uuid.NewString() // random (version 4): the domain's identity
			key, err := store.KeyOf(m)
			if err != nil {
				return err
			}
			op, err := store.PutOp(key, m)
			if err != nil {
				return err
			}
			guards = append(guards, store.Guard{Cmp: store.Absent(key), Err: fmt.Errorf("%w: %s", store.ErrConflict, key)})
			ops = append(ops, op)
		}
		_, err := p.st.FencedTxn(ctx, p.fence, guards, ops...)
		switch {
		case err == nil:
			p.obs.MachineWrite("machines")
		case !errors.Is(err, store.ErrConflict):
			errs = append(errs, err)
		}
	}
	for _, m := range pl.Update {
		if err := write(m, put); err != nil {
			return err
		}
	}
	for _, m := range pl.Delete {
		if err := write(m, store.DeleteObjectOp); err != nil {
			return err
		}
	}
	for _, p := range pl.Pools {
		if err := write(p, put); err != nil {
			return err
		}
	}
	// A claim's status only; its spec is its cluster's controller's. A
	// claim changed meanwhile is planned again on the next pass.
	for _, cl := range pl.Claims {
		if err := write(cl, put); err != nil {
			return err
		}
	}
	for _, node := range pl.RequestRemoval {
		if err := p.fileRemoval(ctx, node); err != nil {
			errs = append(errs, err)
		}
	}
	for _, err := range errs {
		if errors.Is(err, store.ErrNotLeader) {
			return err
		}
	}
	return errors.Join(errs...)
}

// fileRemoval files the safe removal of node: the same RemoveRequest that
// nicoctl remove node and requests.RequestRemoval file, with the same rules
// (an unfinished request is left alone; a finished one from an earlier life
// of the name is replaced), but written fenced on leadership so that a
// deposed leader files nothing.
func (p *poolController) fileRemoval(ctx context.Context, node string) error {
	old := &api.RemoveRequest{}
	var rev int64
	switch err := p.st.Get(ctx, store.RemovalKey(node), old); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case !old.Status.Phase.Finished():
		return nil
	default:
		rev = old.Metadata.Revision
	}
	r := api.NewRemoveRequest(node)
	r.Metadata.CreatedAt = p.now().UTC()
	r.Spec.RequestedBy = "machine pool scale-down (" + p.name + ")"
	r.Metadata.Revision = rev // the guard: the request read above is still there, or none is
	if _, err := p.st.PutUnchanged(ctx, p.fence, r); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/homystack/nico/coordinator/internal/machineclaim"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// etcdMachines is the leader's etcd-machines controller
// (controllers.go). When the EtcdCluster names a machine pool
// (spec.machinePool), it keeps the cluster's MachineClaim (named etcd) at
// the VMs the cluster needs: spec.voters minus the alive control-plane
// hosts that came on their own (voters, learners, standbys). It writes the
// claim's spec and nothing else, fenced on leadership and guarded on the
// revision it read; the machine-pool controller creates, places and takes
// the VMs away, and the membership controller turns them into voters and
// sheds or removes them, each through its own journaled steps.
//
//	[event or resync] --> observe (store, etcd members) --> etcdClaimInput --> machineclaim.Compute --> write claim spec
//
// Every decision is read again from etcd on each pass: a leader that dies
// between two steps leaves the claim, the machines and the removals as
// they were written, and its successor resumes from them.
type etcdMachines struct {
	st *store.Store
	// members lists etcd's members (MemberAdmin.Observe).
	members func(context.Context) ([]membership.Member, error)
	fence   store.Fence
	now     func() time.Time
	log     *slog.Logger
	// policy is Config.Policy, under the EtcdCluster's own.
	policy membership.Policy
	// obs is told of each write of the claim (Config.Observer).
	obs Observer
}

// newEtcdMachines returns the etcd-machines controller of the term of d.
func newEtcdMachines(d leaderDeps, policy membership.Policy) *etcdMachines {
	return &etcdMachines{st: d.st, members: d.admin.Observe, fence: d.fence, now: d.now, log: d.log, policy: policy, obs: d.obs}
}

// reconcile is the etcd-machines controller's Reconcile.
func (e *etcdMachines) reconcile(ctx context.Context) error {
	pl, err := e.pass(ctx)
	if err != nil {
		return fmt.Errorf("etcd machines: %w", err)
	}
	if pl.Changed {
		e.log.Info("etcd machines", "machines", pl.Spec.Machines, "added", pl.Add, "released", pl.Release, "waits", pl.Waits)
	}
	return nil
}

// etcdMachinesObserved is what the etcd-machines planning reads.
type etcdMachinesObserved struct {
	cluster  *api.EtcdCluster
	claim    *api.MachineClaim // nil: none yet
	machines map[string]*api.Machine
	nodes    map[string]*api.Node
	joins    map[string]*api.JoinRequest
	removals map[string]*api.RemoveRequest
	alive    map[string]bool
	live     map[string]api.NodeLiveness
	members  []membership.Member
	policy   membership.Policy
	now      time.Time
}

// pass observes, plans and writes the claim once.
func (e *etcdMachines) pass(ctx context.Context) (machineclaim.Plan, error) {
	o, err := e.observe(ctx)
	if err != nil || o == nil {
		return machineclaim.Plan{}, err
	}
	in, ok := etcdClaimInput(o)
	if !ok {
		return machineclaim.Plan{}, nil
	}
	pl := machineclaim.Compute(in)
	if o.claim != nil && o.cluster.Spec.MachinePool == "" && len(pl.Spec.Machines) == 0 && len(o.claim.Status.Machines) == 0 {
		// No pool is named any more and every VM is gone: the claim goes.
		g, err := store.UnchangedGuard(o.claim)
		if err != nil {
			return pl, err
		}
		op, err := store.DeleteObjectOp(o.claim)
		if err != nil {
			return pl, err
		}
		_, err = e.st.FencedTxn(ctx, e.fence, []store.Guard{g}, op)
		return pl, ignoreConflict(err)
	}
	if !pl.Changed {
		return pl, nil
	}
	cl := o.claim
	if cl == nil {
		cl = api.NewMachineClaim(api.EtcdClaimName)
		cl.Metadata.CreatedAt = o.now.UTC()
		cl.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.Version, Kind: api.KindEtcdCluster, Name: api.EtcdClusterName}}
	}
	cl.Spec = pl.Spec
	if _, err = e.st.PutUnchanged(ctx, e.fence, cl); err == nil {
		e.obs.MachineWrite("claim")
	}
	return pl, ignoreConflict(err)
}

// ignoreConflict drops a lost compare-and-swap: the next pass plans again
// from what is stored.
func ignoreConflict(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// observe reads the inputs; nil when there is no EtcdCluster.
func (e *etcdMachines) observe(ctx context.Context) (*etcdMachinesObserved, error) {
	o := &etcdMachinesObserved{cluster: &api.EtcdCluster{}, now: e.now(), machines: map[string]*api.Machine{}, nodes: map[string]*api.Node{},
		joins: map[string]*api.JoinRequest{}, removals: map[string]*api.RemoveRequest{}}
	switch err := e.st.Get(ctx, store.EtcdClusterKey, o.cluster); {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	cl := &api.MachineClaim{}
	switch err := e.st.Get(ctx, store.MachineClaimKey(api.EtcdClaimName), cl); {
	case errors.Is(err, store.ErrNotFound):
		if o.cluster.Spec.MachinePool == "" {
			return nil, nil // nothing asked, nothing to take back
		}
	case err != nil:
		return nil, err
	default:
		o.claim = cl
	}
	ms, _, err := store.List[api.Machine](ctx, e.st, store.MachinesDir)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		o.machines[m.Metadata.Name] = m
	}
	nodes, _, err := store.List[api.Node](ctx, e.st, store.NodesDir)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		o.nodes[n.Metadata.Name] = n
	}
	joins, _, err := store.List[api.JoinRequest](ctx, e.st, store.JoinsDir)
	if err != nil {
		return nil, err
	}
	for _, j := range joins {
		o.joins[j.Spec.Node] = j
	}
	rs, _, err := store.List[api.RemoveRequest](ctx, e.st, store.RemovalsDir)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		o.removals[r.Metadata.Name] = r
	}
	if o.alive, _, err = e.st.Alive(ctx); err != nil {
		return nil, err
	}
	lv := api.NewLiveness()
	switch err := e.st.Get(ctx, store.LivenessKey, lv); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		o.live = lv.Status.Nodes
	}
	if o.members, err = e.members(ctx); err != nil {
		return nil, err
	}
	membership.MatchNodes(o.members, nodes)
	o.policy = policyOf(o.cluster.Spec.Policy, e.policy)
	return o, nil
}

// etcdClaimInput turns the observation into the claim planner's input:
// false when there is nothing to plan.
func etcdClaimInput(o *etcdMachinesObserved) (machineclaim.Input, bool) {
	pool := o.cluster.Spec.MachinePool
	var cur api.MachineClaimSpec
	if o.claim != nil {
		cur = o.claim.Spec
		if pool == "" {
			pool = cur.Pool // no pool named: the claim's machines are given back
		}
	}
	if pool == "" {
		return machineclaim.Input{}, false
	}
	want := o.cluster.Spec.Voters
	if want <= 0 {
		want = api.DefaultVoters
	}
	if o.cluster.Spec.MachinePool == "" {
		want = 0
	}
	claimed := map[string]bool{}
	for _, name := range cur.Machines {
		claimed[name] = true
	}
	member := map[string]bool{}
	var others []string
	for _, m := range o.members {
		if m.Node == "" {
			continue
		}
		member[m.Node] = true
		if !claimed[m.Node] {
			others = append(others, m.Node)
		}
	}
	// Own: alive control-plane hosts that came on their own and hold or
	// wait for a seat: members, and hosts with a join request (standbys).
	own := 0
	for name, n := range o.nodes {
		if claimed[name] || !n.HasRole(api.RoleControlPlane) || !o.alive[name] || o.deadSince(name) != (time.Time{}) {
			continue
		}
		if member[name] || o.joins[name] != nil {
			own++
		}
	}
	in := machineclaim.Input{Claim: api.EtcdClaimName, Pool: pool, Roles: []api.Role{api.RoleControlPlane}, Quorum: true,
		Want: want, Own: own, Others: others, Current: cur, ReplaceDeadAfter: o.policy.ReplaceDeadMembersAfter, Now: o.now}
	for _, name := range cur.Machines {
		st := machineclaim.Machine{Name: name, Member: member[name]}
		if n := o.nodes[name]; n != nil {
			st.Registered = true
			st.Left = n.Status.Phase == api.NodeRemoved
			if r := o.removals[name]; r != nil && r.Status.Phase == api.RemoveDone && !r.Spec.Standby && !r.Metadata.CreatedAt.Before(n.Metadata.CreatedAt) {
				st.Left = true
			}
			st.DeadSince = o.deadSince(name)
		}
		if m := o.machines[name]; m != nil && m.Status.Phase == api.MachineFailed && st.DeadSince.IsZero() {
			// Failed since its Provisioned condition turned false (its
			// status is rewritten on each retry; the condition's Since
			// stays).
			st.DeadSince = m.Status.UpdatedAt
			if c := api.FindCondition(m.Status.Conditions, api.CondProvisioned); c != nil && !c.Status && !c.Since.IsZero() {
				st.DeadSince = c.Since
			}
		}
		in.Machines = append(in.Machines, st)
	}
	slices.Sort(in.Others)
	return in, true
}

// deadSince is when the leader's liveness record saw node die (zero: not
// dead).
func (o *etcdMachinesObserved) deadSince(node string) time.Time {
	if l, ok := o.live[node]; ok && l.State == string(membership.LiveDead) {
		return l.Since
	}
	return time.Time{}
}

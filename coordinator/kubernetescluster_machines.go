package coordinator

import (
	"context"
	"errors"
	"slices"

	"github.com/homystack/nico/coordinator/internal/machineclaim"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// A KubernetesCluster plane with machinePool asks the pool for the
// machines its count lacks through its own MachineClaim
// (<cluster>-controlplane, <cluster>-dataplane), which the cluster
// controller writes and nothing else does. The plane takes its claim's
// machines first once they register (kubeplan.Select), whatever their
// labels; a machine the plane holds is never given back until the
// cluster has released it. A cluster being deleted asks for none: its
// claims give back every machine once released, and a claim whose
// cluster is gone is emptied and then deleted, so deleting a cluster
// destroys the VMs it asked for and no others.
//
//	plane count - selected machines not the claim's --> machineclaim.Compute --> claim spec (fenced, CAS)

// planeClaims keeps the claims of kc's planes.
func (cc *clusterController) planeClaims(ctx context.Context, f *clusterFleet, kc *api.KubernetesCluster, sel kubeplan.Selection) error {
	var errs []error
	for _, p := range []struct {
		plane    string
		set      api.MachineSet
		selected []string
	}{{api.PlaneControl, kc.Spec.ControlPlane.MachineSet, sel.ControlPlane}, {api.PlaneData, kc.Spec.DataPlane.MachineSet, sel.DataPlane}} {
		name := api.KubernetesPlaneClaimName(kc.Metadata.Name, p.plane)
		cur := f.machineClaim(name)
		pool, want := p.set.MachinePool, p.set.Count
		if pool == "" && cur != nil {
			pool = cur.Spec.Pool // no pool named any more: give its machines back
		}
		if pool == "" {
			continue
		}
		if kc.Deleting() || p.set.MachinePool == "" {
			want = 0
		}
		errs = append(errs, cc.writePlaneClaim(ctx, f, kc.Metadata.Name, name, pool, want, p.selected, cur))
	}
	return errors.Join(errs...)
}

// orphanClaims empties, then deletes, the claims of clusters that are
// gone.
func (cc *clusterController) orphanClaims(ctx context.Context, f *clusterFleet) error {
	live := map[string]bool{}
	for _, kc := range f.clusters {
		live[kc.Metadata.Name] = true
	}
	var errs []error
	for _, cl := range f.machineClaims {
		for _, o := range cl.Metadata.OwnerReferences {
			if o.Kind == api.KindKubernetesCluster && !live[o.Name] {
				errs = append(errs, cc.writePlaneClaim(ctx, f, o.Name, cl.Metadata.Name, cl.Spec.Pool, 0, nil, cl))
			}
		}
	}
	return errors.Join(errs...)
}

// writePlaneClaim plans claim name of cluster's plane and writes it.
func (cc *clusterController) writePlaneClaim(ctx context.Context, f *clusterFleet, cluster, name, pool string, want int, selected []string, cur *api.MachineClaim) error {
	var spec api.MachineClaimSpec
	if cur != nil {
		spec = cur.Spec
	}
	held := map[string]bool{}
	own := 0
	for _, m := range selected {
		held[m] = true
		if f.claimOf(m) != name {
			own++
		}
	}
	etcd := f.etcdMemberNodes()
	in := machineclaim.Input{Claim: name, Pool: pool, Roles: []api.Role{api.RoleWorker}, Want: want, Own: own, Current: spec,
		ReplaceDeadAfter: f.replaceDeadAfter, Now: cc.now()}
	for _, m := range spec.Machines {
		// A member holds the role until the cluster has released it (its
		// Node drained and deleted) and, on a control-plane VM, its etcd
		// member is removed.
		st := machineclaim.Machine{Name: m, Member: held[m] || f.claims[m] == cluster || etcd[m]}
		if n := f.nodes[m]; n != nil {
			st.Registered, st.Left = true, n.Status.Phase == api.NodeRemoved
			st.DeadSince = f.deadSince(m)
		}
		in.Machines = append(in.Machines, st)
	}
	pl := machineclaim.Compute(in)
	if cur != nil && want == 0 && len(pl.Spec.Machines) == 0 && len(cur.Status.Machines) == 0 {
		g, err := store.UnchangedGuard(cur)
		if err != nil {
			return err
		}
		op, err := store.DeleteObjectOp(cur)
		if err != nil {
			return err
		}
		_, err = cc.st.FencedTxn(ctx, cc.fence, []store.Guard{g}, op)
		return ignoreConflict(err)
	}
	if !pl.Changed {
		return nil
	}
	cl := cur
	if cl == nil {
		cl = api.NewMachineClaim(name)
		cl.Metadata.CreatedAt = cc.now().UTC()
		cl.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: cluster}}
	}
	cl.Spec = pl.Spec
	_, err := cc.st.PutUnchanged(ctx, cc.fence, cl)
	return ignoreConflict(err)
}

// machineClaim is the claim named name, nil when there is none.
func (f *clusterFleet) machineClaim(name string) *api.MachineClaim {
	for _, c := range f.machineClaims {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// etcdMemberNodes are the nodes that run an etcd member, matched by
// peer URL.
func (f *clusterFleet) etcdMemberNodes() map[string]bool {
	var nodes []*api.Node
	for _, n := range f.nodes {
		nodes = append(nodes, n)
	}
	ms := slices.Clone(f.members)
	membership.MatchNodes(ms, nodes)
	out := map[string]bool{}
	for _, m := range ms {
		if m.Node != "" {
			out[m.Node] = true
		}
	}
	return out
}

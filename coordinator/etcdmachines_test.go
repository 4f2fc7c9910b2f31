package coordinator

import (
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/internal/machineclaim"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
)

// TestEtcdClaimInput: what the etcd-machines controller hands the claim
// planner from the stored objects and etcd's members.
func TestEtcdClaimInput(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	node := func(name string, roles ...api.Role) *api.Node {
		n := api.NewNode(name)
		n.Spec.Roles = roles
		n.Metadata.CreatedAt = now.Add(-time.Hour)
		return n
	}
	removal := func(name string, standby bool) *api.RemoveRequest {
		r := api.NewRemoveRequest(name)
		r.Spec.Standby = standby
		r.Metadata.CreatedAt = now.Add(-time.Minute)
		r.Status.Phase = api.RemoveDone
		return r
	}
	cp := api.RoleControlPlane
	ec := api.NewEtcdCluster()
	ec.Spec.MachinePool = "vms"
	ec.Spec.Policy.ReplaceDeadMembersAfter = api.Duration(time.Minute)
	claim := api.NewMachineClaim(api.EtcdClaimName)
	claim.Spec = api.MachineClaimSpec{Pool: "vms", Machines: []string{"vms-etcd-0", "vms-etcd-1", "vms-etcd-2", "vms-etcd-3"}, NextOrdinal: 4}
	failed := api.NewMachine("vms-etcd-3")
	failed.Status.Phase = api.MachineFailed
	failed.Status.UpdatedAt = now
	failed.Status.Conditions = []api.Condition{{Type: api.CondProvisioned, Status: false, Since: now.Add(-2 * time.Minute)}}
	o := &etcdMachinesObserved{cluster: ec, claim: claim, now: now,
		machines: map[string]*api.Machine{"vms-etcd-3": failed},
		nodes: map[string]*api.Node{"cp-1": node("cp-1", cp), "cp-2": node("cp-2", cp), "cp-3": node("cp-3", cp), "hv-1": node("hv-1", api.RoleHypervisor),
			"w-1": node("w-1", api.RoleWorker), "vms-etcd-0": node("vms-etcd-0", cp), "vms-etcd-1": node("vms-etcd-1", cp), "vms-etcd-2": node("vms-etcd-2", cp)},
		joins:    map[string]*api.JoinRequest{"cp-2": api.NewJoinRequest("cp-2")},
		removals: map[string]*api.RemoveRequest{"vms-etcd-1": removal("vms-etcd-1", false), "vms-etcd-2": removal("vms-etcd-2", true)},
		alive:    map[string]bool{"cp-1": true, "cp-2": true, "cp-3": true, "hv-1": true, "w-1": true, "vms-etcd-0": true},
		live:     map[string]api.NodeLiveness{"cp-3": {State: "dead", Since: now.Add(-time.Hour)}, "vms-etcd-2": {State: "dead", Since: now.Add(-30 * time.Second)}},
		members:  []membership.Member{{Node: "cp-1", Leader: true}, {Node: "vms-etcd-0"}, {Node: "cp-3"}},
		policy:   membership.Policy{ReplaceDeadMembersAfter: time.Minute},
	}
	in, ok := etcdClaimInput(o)
	if !ok {
		t.Fatal("nothing to plan")
	}
	// Own: cp-1 (a member) and cp-2 (a standby's request); cp-3 is dead,
	// hv-1 and w-1 are no control-plane hosts, the VMs are the claim's.
	if in.Want != api.DefaultVoters || in.Own != 2 || !slices.Equal(in.Others, []string{"cp-1", "cp-3"}) || in.ReplaceDeadAfter != time.Minute {
		t.Fatalf("input %+v", in)
	}
	want := []machineclaim.Machine{
		{Name: "vms-etcd-0", Registered: true, Member: true},
		{Name: "vms-etcd-1", Registered: true, Left: true},                            // removed (a plain removal, done)
		{Name: "vms-etcd-2", Registered: true, DeadSince: now.Add(-30 * time.Second)}, // shed to a standby: not gone
		{Name: "vms-etcd-3", DeadSince: now.Add(-2 * time.Minute)},                    // its domain failed
	}
	if !slices.Equal(in.Machines, want) {
		t.Fatalf("machines\n%+v\nwant\n%+v", in.Machines, want)
	}

	// No pool named any more: the claim's machines are given back.
	ec.Spec.MachinePool = ""
	if in, ok := etcdClaimInput(o); !ok || in.Want != 0 || in.Pool != "vms" {
		t.Fatalf("without a pool: %v %+v", ok, in)
	}
	o.claim = nil
	if _, ok := etcdClaimInput(o); ok {
		t.Fatal("planned with neither pool nor claim")
	}
}

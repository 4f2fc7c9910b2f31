package coordinator

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// claimed registers a machine the pool created for claim, as the pool and
// the machine's agent would.
func (h *kcHarness) claimed(name, claim string, labels ...string) {
	h.t.Helper()
	m := api.NewMachine(name)
	m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: "vms", Claim: claim, Host: "hv-1"}
	m.Status.Phase = api.MachineRunning
	if err := h.st.PutObject(h.t.Context(), m); err != nil {
		h.t.Fatal(err)
	}
	h.machine(name, labels...)
}

func (h *kcHarness) machineClaim(name string) *api.MachineClaim {
	h.t.Helper()
	c := &api.MachineClaim{}
	if err := h.st.Get(h.t.Context(), store.MachineClaimKey(name), c); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// TestClusterMachinesFromPool: a cluster whose planes name a machine pool
// asks it, through one MachineClaim per plane, for what its count lacks
// beyond the free machines its selector finds; once registered, the
// claim's VMs are the plane's first whatever their labels, and a VM
// another claim asked for (the EtcdCluster's) is never taken. Deleting the
// cluster gives back the VMs it asked for and deletes its claims; the
// other claim's VM is untouched.
func TestClusterMachinesFromPool(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	h.machine("dp-1", "role", "dp")
	h.claimed("vms-etcd-0", api.EtcdClaimName, "role", "dp") // matches the selector, but the etcd cluster's
	kc := api.NewKubernetesCluster("prod")
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{MachinePool: "vms", Count: 1}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{MachineSelector: &api.MachineSelector{MatchLabels: map[string]string{"role": "dp"}}, Count: 2, MachinePool: "vms"}
	h.create(kc)
	h.pass()
	cp, dp := h.machineClaim("prod-controlplane"), h.machineClaim("prod-dataplane")
	if cp == nil || dp == nil {
		t.Fatalf("claims %v %v", cp, dp)
	}
	if !slices.Equal(cp.Spec.Machines, []string{"vms-prod-controlplane-0"}) || !slices.Equal(dp.Spec.Machines, []string{"vms-prod-dataplane-0"}) ||
		cp.Spec.Pool != "vms" || len(cp.Metadata.OwnerReferences) != 1 || cp.Metadata.OwnerReferences[0].Name != "prod" {
		t.Fatalf("claims %+v %+v", cp, dp)
	}

	// The pool creates the VMs, they register (no labels of the selector).
	h.claimed("vms-prod-controlplane-0", "prod-controlplane")
	h.claimed("vms-prod-dataplane-0", "prod-dataplane")
	h.pass()
	h.pass()
	got := h.cluster("prod").Status
	if !slices.Equal(got.ControlPlane.Machines, []string{"vms-prod-controlplane-0"}) || !slices.Equal(got.DataPlane.Machines, []string{"dp-1", "vms-prod-dataplane-0"}) {
		t.Fatalf("planes %v %v", got.ControlPlane.Machines, got.DataPlane.Machines)
	}
	if c := h.machineClaim("prod-dataplane"); !slices.Equal(c.Spec.Machines, []string{"vms-prod-dataplane-0"}) {
		t.Fatalf("data plane claim after the joins: %v", c.Spec.Machines)
	}

	// Deletion: the cluster releases its machines, then gives its VMs back.
	kc = h.cluster("prod")
	at := h.now
	kc.Metadata.DeletionTimestamp = &at
	if err := h.st.UpdateObject(h.t.Context(), kc); err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		n := 0
		for _, name := range []string{"prod-controlplane", "prod-dataplane"} {
			if c := h.machineClaim(name); c != nil {
				n += len(c.Spec.Machines)
			}
		}
		return n
	}
	for i := 0; i < 15 && (h.cluster("prod") != nil || listed() > 0); i++ {
		h.pass()
	}
	if h.cluster("prod") != nil {
		t.Fatalf("cluster still there: %+v", h.cluster("prod").Status)
	}
	for _, name := range []string{"prod-controlplane", "prod-dataplane"} {
		c := h.machineClaim(name)
		if c == nil {
			continue
		}
		if len(c.Spec.Machines) != 0 {
			t.Fatalf("claim %s still lists %v", name, c.Spec.Machines)
		}
		// The pool takes the VMs away and says so in the claim's status;
		// with none left the claim goes.
		c.Status.Machines = nil
		if err := h.st.UpdateObject(h.t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	h.pass()
	if cp, dp := h.machineClaim("prod-controlplane"), h.machineClaim("prod-dataplane"); cp != nil || dp != nil {
		t.Fatalf("claims left: %+v %+v", cp, dp)
	}
	if m := &(api.Machine{}); h.st.Get(h.t.Context(), store.MachineKey("vms-etcd-0"), m) != nil || m.Spec.Claim != api.EtcdClaimName {
		t.Fatalf("the etcd cluster's VM: %+v", m)
	}
}

// TestClusterDeadVMIsReplaced: a plane's VM that the liveness record has
// seen dead past the EtcdCluster's replaceDeadMembersAfter is let go by
// its plane (released as any leaving machine), then taken off its claim
// (the pool destroys its domain and disk) and a fresh VM is asked for in
// its place; before that time it is kept. A dead control-plane VM that
// runs an etcd member stays on its claim until the member is removed.
func TestClusterDeadVMIsReplaced(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	ec := api.NewEtcdCluster()
	ec.Spec.Policy.ReplaceDeadMembersAfter = api.Duration(time.Minute)
	if err := h.st.PutObject(h.t.Context(), ec); err != nil {
		t.Fatal(err)
	}
	kc := api.NewKubernetesCluster("prod")
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{MachinePool: "vms", Count: 1}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{MachinePool: "vms", Count: 1}
	h.create(kc)
	h.pass()
	h.claimed("vms-prod-controlplane-0", "prod-controlplane")
	h.claimed("vms-prod-dataplane-0", "prod-dataplane")
	// The control-plane VM runs the etcd member (its peer URL).
	n := &api.Node{}
	if err := h.st.Get(h.t.Context(), store.NodeKey("vms-prod-controlplane-0"), n); err != nil {
		t.Fatal(err)
	}
	n.Spec.PeerURL = h.cl.Members[0].PeerURL
	if err := h.st.UpdateObject(h.t.Context(), n); err != nil {
		t.Fatal(err)
	}
	h.pass()
	h.pass()
	if got := h.cluster("prod").Status.DataPlane.Machines; !slices.Equal(got, []string{"vms-prod-dataplane-0"}) {
		t.Fatalf("data plane %v", got)
	}

	lv := api.NewLiveness()
	lv.Status.Nodes = map[string]api.NodeLiveness{"vms-prod-dataplane-0": {State: string(membership.LiveDead), Since: h.now},
		"vms-prod-controlplane-0": {State: string(membership.LiveDead), Since: h.now}}
	if err := h.st.PutObject(h.t.Context(), lv); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.pass() // 5 s dead: kept
	}
	if got := h.machineClaim("prod-dataplane").Spec.Machines; !slices.Equal(got, []string{"vms-prod-dataplane-0"}) {
		t.Fatalf("claim before replaceDeadMembersAfter: %v", got)
	}
	if got := h.cluster("prod").Status.DataPlane.Machines; !slices.Equal(got, []string{"vms-prod-dataplane-0"}) {
		t.Fatalf("data plane before replaceDeadMembersAfter: %v", got)
	}

	h.now = h.now.Add(time.Minute)
	want := []string{"vms-prod-dataplane-1"}
	for i := 0; i < 15 && !slices.Equal(h.machineClaim("prod-dataplane").Spec.Machines, want); i++ {
		h.pass()
	}
	if got := h.machineClaim("prod-dataplane").Spec.Machines; !slices.Equal(got, want) {
		t.Fatalf("claim after replaceDeadMembersAfter: %v (plane %v)", got, h.cluster("prod").Status.DataPlane.Machines)
	}
	if got := h.machineClaim("prod-controlplane").Spec.Machines; !slices.Equal(got, []string{"vms-prod-controlplane-0"}) {
		t.Fatalf("the dead control-plane VM that runs an etcd member is kept until the member is removed: %v", got)
	}
	// The fresh VM registers and the plane takes it.
	h.claimed("vms-prod-dataplane-1", "prod-dataplane")
	h.pass()
	h.pass()
	if got := h.cluster("prod").Status.DataPlane.Machines; !slices.Equal(got, want) {
		t.Fatalf("data plane with the fresh VM: %v", got)
	}
}

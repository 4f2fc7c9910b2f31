package statuspage

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// t0 is the fixtures' clock.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// newStore starts a real embedded etcd cluster of n members and returns a
// store on it.
func newStore(t *testing.T, n int) (*etcdtest.Cluster, *store.Store) {
	t.Helper()
	c := etcdtest.Start(t, n)
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

// put writes obj where it lives.
func put(t *testing.T, st *store.Store, obj api.Object) {
	t.Helper()
	if obj.GetTypeMeta().APIVersion == "" { // a KubernetesCluster has its own
		obj.GetTypeMeta().APIVersion = api.Version
	}
	if err := st.PutObject(context.Background(), obj); err != nil {
		t.Fatalf("put %s %s: %v", obj.GetTypeMeta().Kind, obj.GetMetadata().Name, err)
	}
}

// node is a control-plane node whose member is in state ms.
func node(name string, ms api.MemberState) *api.Node {
	n := api.NewNode(name)
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Status.MemberState = ms
	n.Status.Phase = api.NodeMember
	if ms == api.MemberLearner {
		n.Status.Phase = api.NodeJoining
	}
	return n
}

// fleet writes a fleet in the middle of things: a node with a generation
// and liveness, a join in flight with its journal, a rollout on its second
// node, a machine pool, a Kubernetes cluster and the EtcdCluster.
func fleet(t *testing.T, st *store.Store, member string) {
	t.Helper()
	ctx := context.Background()
	put(t, st, node(member, api.MemberVoter))
	w := api.NewNode("wk-1")
	w.Spec.Roles = []api.Role{api.RoleWorker}
	w.Status.Phase = api.NodeRegistered
	put(t, st, w)
	live := api.NewLiveness()
	live.Status.Nodes = map[string]api.NodeLiveness{
		member: {State: "alive", Since: t0},
		"wk-1": {State: "dead", Since: t0, Reason: "lease expired"},
	}
	put(t, st, live)
	gen := &api.NixosConfiguration{TypeMeta: api.TypeMeta{Kind: api.KindNixosConfiguration}, Metadata: api.ObjectMeta{Name: member}}
	gen.Spec.Generation = 3
	gen.Status.AppliedGeneration = 2
	gen.Status.Phase = api.GenerationApplying
	put(t, st, gen)

	op := api.NewOperation("join-cp-2-1")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-2", StartedBy: "cp-1"}
	op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepAddLearner, StepSince: t0, Leader: "cp-1"}
	op.Record(t0, "cp-1", "adding cp-2 as a learner")
	op.Status.Step = api.StepLearner
	op.Record(t0.Add(time.Second), "cp-1", "waiting for cp-2 to start")
	put(t, st, op)
	if _, err := st.Client().Put(ctx, store.ActiveOpKey, op.Metadata.Name); err != nil {
		t.Fatal(err)
	}

	r := api.NewRollout("demo-v2")
	r.Spec.Template.Generation = 3
	r.Status.Phase = api.RolloutRunning
	r.Status.Current = []string{member}
	r.Status.Nodes = []api.NodeProgress{
		{Name: "wk-1", Phase: api.NodeDone, StartedAt: t0, FinishedAt: t0.Add(40 * time.Second)},
		{Name: member, ControlPlane: true, Phase: api.NodeApplying, StartedAt: t0.Add(40 * time.Second)},
		{Name: "cp-9", ControlPlane: true},
	}
	put(t, st, r)

	p := api.NewMachinePool("workers")
	p.Spec.Count = 3
	p.Status = api.MachinePoolStatus{Machines: 3, Running: 2, Pending: 1}
	put(t, st, p)

	cl := api.NewMachineClaim(api.EtcdClaimName)
	cl.Spec = api.MachineClaimSpec{Pool: "workers", Machines: []string{"workers-etcd-0"}, Quorum: true}
	cl.Status.Machines = []api.ClaimedMachine{{Name: "workers-etcd-0", Host: "hv-1", Domain: "rack-a", Phase: api.MachineRunning}}
	cl.Status.Conditions = []api.Condition{{Type: api.CondSpread, Status: false, Reason: "QuorumAtRisk", Message: "losing rack-a would lose 2 of 3 voters (quorum 2)"}}
	put(t, st, cl)

	k := api.NewKubernetesCluster("prod")
	k.Spec.Version = "1.37.2"
	k.Spec.ControlPlane.Machines = []string{member}
	k.Status = api.KubernetesClusterStatus{Phase: api.ClusterProvisioning, ControlPlaneEndpoint: "10.0.0.1:6443",
		ControlPlane: api.ReplicaStatus{Ready: 0, Total: 1, Machines: []string{member}},
		Components:   []api.ComponentStatus{{Name: api.ComponentEtcd, ReplicaStatus: api.ReplicaStatus{Ready: 1, Total: 1}}, {Name: api.ComponentAPIServer, ReplicaStatus: api.ReplicaStatus{Total: 1}}},
		Conditions:   []api.ClusterCondition{{Type: api.CondEtcdReady, Status: api.ConditionTrue}, {Type: api.CondAPIServerReady, Status: api.ConditionFalse, Reason: "NotAnswering"}},
		Rollout:      "prod-1"}
	put(t, st, k)

	ec := api.NewEtcdCluster()
	ec.Status.FaultTolerance = 0
	ec.Status.ClusterVersion = "3.6.0"
	ec.Status.Conditions = []api.Condition{{Type: api.CondHealthy, Status: true}}
	ec.Status.UpdatedAt = t0
	put(t, st, ec)
}

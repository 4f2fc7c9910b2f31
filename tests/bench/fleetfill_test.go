package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fleetShape is what fillFleet writes: n machines that registered as the
// agent registers them (a Node with its certificate, labels and status,
// a heartbeat key on its own lease), the fleet's history as the leader
// leaves it (liveness, one NixosConfiguration per machine with its last
// generations, finished rollouts with their step operations, the joins
// of the control plane) and nothing that depends on a running agent.
type fleetShape struct {
	n int
	// bare are the first machines, left with no fleet configuration: a
	// Kubernetes cluster's rollout gives them theirs.
	bare int
	// generations each configured machine has applied (the rollouts'
	// count; at most api.MaxGenerationHistory are recorded).
	generations int
	ca          *pki.CA
	now         time.Time
}

// fleetMachine names machine i.
func fleetMachine(i int) string { return fmt.Sprintf("m-%04d", i) }

// controlPlane is how many of the fleet's machines run nico's etcd.
const controlPlane = 3

// fillFleet writes sh into st, a hundred operations per transaction.
func fillFleet(ctx context.Context, tb testing.TB, st *store.Store, sh fleetShape) {
	tb.Helper()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := st.Txn(ctx, nil, ops...); err != nil {
			tb.Fatalf("fill: %v", err)
		}
		ops = ops[:0]
	}
	put := func(key string, obj api.Object, opts ...clientv3.OpOption) {
		op, err := store.PutOp(key, obj, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		ops = append(ops, op)
		if len(ops) >= 100 {
			flush()
		}
	}
	now := sh.now
	start := now.Add(-30 * 24 * time.Hour)
	live := api.NewLiveness()
	live.Status.Leader, live.Status.UpdatedAt, live.Status.Nodes = "m-0000", now, map[string]api.NodeLiveness{}
	template := func(gen int64) api.NixosConfigurationSpec {
		return api.NixosConfigurationSpec{Generation: gen, GitRepo: "https://git.example/fleet", Ref: "main",
			Revision: fmt.Sprintf("%040x", gen*7919), ConfigurationSubdir: "hosts", Flake: "#worker"}
	}
	for i := range sh.n {
		name := fleetMachine(i)
		lease, err := st.Client().Grant(ctx, 3600)
		if err != nil {
			tb.Fatal(err)
		}
		n := api.NewNode(name)
		n.Metadata.CreatedAt = start.Add(time.Duration(i) * time.Second)
		n.Spec.Roles = []api.Role{api.RoleWorker}
		n.Spec.Labels = map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3),
			"nico.dev/rack": fmt.Sprintf("rack-%02d", i/40), "node.kubernetes.io/instance-type": "c2-standard-8"}
		ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)
		n.Status = api.NodeStatus{Phase: api.NodeRegistered, Lease: int64(lease.ID), AgentVersion: "0.9.0",
			GossipAddr: ip + ":7946", UpdatedAt: now}
		if i < controlPlane {
			n.Spec.Roles = []api.Role{api.RoleControlPlane}
			n.Spec.PeerURL, n.Spec.ClientURL = "https://"+ip+":2380", "https://"+ip+":2379"
			n.Status.Phase, n.Status.MemberID, n.Status.MemberState = api.NodeMember, api.MemberID(0x1000+i), api.MemberVoter
			n.Status.EtcdVersion = "3.6.16"
			n.Status.DataDir = &api.DataDirStatus{FreeBytes: 80 << 30, SizeBytes: 100 << 30, MeasuredAt: now}
		}
		if sh.ca != nil {
			crt, _, err := sh.ca.Issue(pki.Request{CommonName: "node:" + name, Usage: pki.UsageClient}, now.Add(-time.Hour))
			if err != nil {
				tb.Fatal(err)
			}
			n.Status.Certificate = string(crt)
		}
		put(store.NodeKey(name), n)
		ops = append(ops, store.HeartbeatOp(name, now, lease.ID))
		live.Status.Nodes[name] = api.NodeLiveness{State: "alive", Since: n.Metadata.CreatedAt.Add(time.Minute)}
		if i < sh.bare || sh.generations == 0 {
			continue
		}
		cfg := api.NewNixosConfiguration(name)
		cfg.Spec = template(int64(sh.generations))
		cfg.Status = api.NixosConfigurationStatus{Generation: cfg.Spec.Generation, Attempt: 1, Phase: api.GenerationApplied,
			AppliedGeneration: cfg.Spec.Generation, Toplevel: "/nix/store/" + strings.Repeat("x", 32) + "-nixos-system-" + name, UpdatedAt: now}
		for g := 1; g <= sh.generations; g++ {
			at := start.Add(time.Duration(g) * 24 * time.Hour)
			cfg.RecordGeneration(api.GenerationRecord{Generation: int64(g), Phase: api.GenerationApplied, Toplevel: cfg.Status.Toplevel,
				Revision: template(int64(g)).Revision, Started: at, Finished: at.Add(40 * time.Second)})
		}
		put(store.NixosConfigKey(name), cfg)
	}
	put(store.LivenessKey, live)
	flush()
	fillHistory(ctx, tb, st, sh, template, put)
	flush()
}

// fillHistory writes the joins of the control plane and the fleet's
// rollouts, each with its step operations (a tenth of the machines a
// step).
func fillHistory(ctx context.Context, tb testing.TB, st *store.Store, sh fleetShape, template func(int64) api.NixosConfigurationSpec, put func(string, api.Object, ...clientv3.OpOption)) {
	tb.Helper()
	start := sh.now.Add(-30 * 24 * time.Hour)
	for i := range controlPlane {
		name := fleetMachine(i)
		op := api.NewOperation(fmt.Sprintf("join-%s-1", name))
		op.Spec = api.OperationSpec{Type: api.OpJoin, Node: name, PeerURL: "https://" + name + ":2380"}
		at := start.Add(time.Duration(i) * time.Minute)
		op.Metadata.CreatedAt = at
		op.Status = api.OperationStatus{Phase: api.OpSucceeded, Step: api.StepDone, StepSince: at.Add(10 * time.Second), Leader: "m-0000", UpdatedAt: at}
		for j, s := range []api.OpStep{api.StepAddLearner, api.StepLearner, api.StepDone} {
			op.Status.History = append(op.Status.History, api.Event{At: at.Add(time.Duration(j) * 3 * time.Second), Step: s, Leader: "m-0000", Message: string(s) + " " + name})
		}
		put(store.OpKey(op.Metadata.Name), op)
	}
	var nodes []string
	for i := sh.bare; i < sh.n; i++ {
		nodes = append(nodes, fleetMachine(i))
	}
	if sh.generations == 0 || len(nodes) == 0 {
		return
	}
	step := max(1, len(nodes)/10)
	for g := 2; g <= sh.generations; g++ {
		name := fmt.Sprintf("fleet-g%d", g)
		at := start.Add(time.Duration(g) * 24 * time.Hour)
		r := api.NewRollout(name)
		r.Metadata.CreatedAt = at
		r.Spec = api.RolloutSpec{Template: template(int64(g)), Nodes: nodes, MaxUnavailable: "10%"}
		r.Status = api.RolloutStatus{Phase: api.RolloutSucceeded, StartedAt: at, FinishedAt: at.Add(time.Hour), UpdatedAt: at.Add(time.Hour), Leader: "m-0000"}
		prev := template(int64(g - 1))
		for k, m := range nodes {
			done := at.Add(time.Duration(k/step+1) * 5 * time.Minute)
			r.Status.Nodes = append(r.Status.Nodes, api.NodeProgress{Name: m, Phase: api.NodeDone, Generation: int64(g), Previous: &prev,
				StartedAt: done.Add(-time.Minute), FinishedAt: done})
		}
		for k := 0; k*step < len(nodes); k++ {
			op := api.NewOperation(fmt.Sprintf("%s-step-%d", name, k+1))
			op.Metadata.CreatedAt = at.Add(time.Duration(k) * 5 * time.Minute)
			op.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: nodes[k*step]}
			op.Status = api.OperationStatus{Phase: api.OpSucceeded, Step: api.StepDone, StepSince: op.Metadata.CreatedAt.Add(5 * time.Minute), Leader: "m-0000", UpdatedAt: op.Metadata.CreatedAt}
			op.Status.History = []api.Event{{At: op.Metadata.CreatedAt, Step: api.StepSwitching, Leader: "m-0000", Message: fmt.Sprintf("step %d of %s", k+1, name)},
				{At: op.Metadata.CreatedAt.Add(5 * time.Minute), Step: api.StepDone, Leader: "m-0000", Message: "step done"}}
			put(store.OpKey(op.Metadata.Name), op)
		}
		r.Status.Step = len(nodes)/step + 1
		put(store.RolloutKey(name), r)
	}
}

package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func enc(t *testing.T, v any) []byte {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// joinOp is a join operation of cp-2 with the history lines the executor
// writes, up to n of them.
func joinOp(n int) *api.Operation {
	op := api.NewOperation("op-join-cp-2")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-2", PeerURL: "https://10.0.0.2:2380"}
	op.Status.Phase = api.OpRunning
	lines := []struct {
		step api.OpStep
		msg  string
	}{
		{api.StepAddLearner, "started"},
		{api.StepLearner, "learner 00000000000000ab added"},
		{api.StepLearner, "learner at raft index 42"},
		{api.StepLearner, "learner 00000000000000ab promoted"},
		{api.StepDone, "member 00000000000000ab is a voter"},
	}
	for i, l := range lines[:n] {
		op.Status.Step = l.step
		op.Record(at(i), "coord-1", l.msg)
	}
	if n == len(lines) {
		op.Status.Phase = api.OpSucceeded
	}
	return op
}

func failedJoin() *api.Operation {
	op := joinOp(2)
	op.Status.Phase = api.OpFailed
	op.Record(at(9), "coord-1", "learner never started within 2m")
	return op
}

func removeOp() *api.Operation {
	op := api.NewOperation("op-remove-cp-1")
	op.Spec = api.OperationSpec{Type: api.OpRemove, Node: "cp-1", MemberID: 0x1}
	op.Status.Step = api.StepTransferLeader
	op.Record(at(0), "coord-2", "started")
	op.Record(at(1), "coord-2", "moved etcd leadership from 0000000000000001 to 0000000000000002")
	op.Status.Step = api.StepRemoveMember
	op.Record(at(2), "coord-2", "removing member 0000000000000001")
	op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
	op.Record(at(3), "coord-2", "node cp-1 removed")
	return op
}

func rolloutStepOp(done bool) *api.Operation {
	op := api.NewOperation("rollout-r1-1")
	op.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: "dp-1,dp-2", Request: "r1"}
	op.Status.Phase = api.OpRunning
	op.Record(at(0), "coord-1", "data plane batch of 2")
	if done {
		op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
		op.Record(at(5), "coord-1", "MarkDone [dp-1 dp-2]")
	}
	return op
}

// longOp has a full history of MaxHistory progress lines; shifted, one
// more line pushed the oldest out.
func longOp(shifted bool) *api.Operation {
	op := joinOp(2)
	for i := 0; len(op.Status.History) < api.MaxHistory; i++ {
		op.Record(at(10+i), "coord-1", fmt.Sprintf("learner at raft index %d", i))
	}
	if shifted {
		op.Record(at(100), "coord-1", "learner 00000000000000ab promoted")
	}
	return op
}

func node(phase api.NodePhase) *api.Node {
	n := api.NewNode("cp-2")
	n.Metadata.CreatedAt = at(0)
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Status = api.NodeStatus{Phase: phase, UpdatedAt: at(7), Message: "learner running"}
	return n
}

func liveness(states ...string) *api.Liveness {
	l := api.NewLiveness()
	l.Status.Nodes = map[string]api.NodeLiveness{}
	l.Status.Leader = "coord-1"
	for i := 0; i+1 < len(states); i += 2 {
		l.Status.Nodes[states[i]] = api.NodeLiveness{State: states[i+1], Since: at(i), Reason: "gossip " + states[i+1]}
	}
	return l
}

func rollout(f func(r *api.Rollout)) *api.Rollout {
	r := api.NewRollout("r1")
	r.Status = api.RolloutStatus{Phase: api.RolloutRunning, StartedAt: at(0), UpdatedAt: at(1),
		Nodes: []api.NodeProgress{{Name: "dp-1", Generation: 4}, {Name: "cp-1", ControlPlane: true, Generation: 7}}}
	if f != nil {
		f(r)
	}
	return r
}

func TestDerive(t *testing.T) {
	join := api.NewJoinRequest("cp-2")
	join.Metadata.CreatedAt = at(0)
	join.Spec = api.JoinRequestSpec{Node: "cp-2", PeerURL: "https://10.0.0.2:2380", Attempt: 1}
	joinAdded := *join
	joinAdded.Status = api.JoinRequestStatus{Phase: api.JoinLearnerAdded, MemberID: 0xab, Operation: "op-join-cp-2", UpdatedAt: at(1)}
	joinAdopted := *join
	joinAdopted.Status = api.JoinRequestStatus{Phase: api.JoinJoined, Message: "member is a voter", UpdatedAt: at(3)}
	joinRetry := *join
	joinRetry.Spec.Attempt = 2
	rm := api.NewRemoveRequest("cp-1")
	rm.Spec.RequestedBy = "nicoctl"
	rm.Metadata.CreatedAt = at(0)
	refused := *rm
	refused.Status = api.RemoveRequestStatus{Phase: api.RemoveRefused, Message: "removing it leaves 1 of 3 voters healthy, quorum is 2", UpdatedAt: at(1)}
	refusedAgain := refused
	refusedAgain.Status.UpdatedAt = at(5)
	revoked := *rm
	revoked.Status = api.RemoveRequestStatus{Phase: api.RemoveDone, Operation: "op-remove-cp-1", UpdatedAt: at(3), IdentityRevokedAt: at(3)}
	running := *rm
	running.Status = api.RemoveRequestStatus{Phase: api.RemoveRunning, Operation: "op-remove-cp-1", UpdatedAt: at(1)}

	gen := api.NewNixosConfiguration("dp-1")
	gen.Status = api.NixosConfigurationStatus{Generation: 4, Phase: api.GenerationApplying, UpdatedAt: at(1)}
	gen.RecordGeneration(api.GenerationRecord{Generation: 3, Phase: api.GenerationApplied, Toplevel: "/nix/store/x", Started: at(0), Finished: at(0)})
	genFailed := *gen
	genFailed.Status.Phase = api.GenerationFailed
	genFailed.Status.History = append([]api.GenerationRecord(nil), gen.Status.History...)
	genFailed.RecordGeneration(api.GenerationRecord{Generation: 4, Phase: api.GenerationFailed, Message: "health check: unit foo failed", Started: at(1), Finished: at(2)})

	m := api.NewMachine("vm-0")
	m.Metadata.CreatedAt = at(0)
	m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: "p", Host: "hv-1"}
	m.Status = api.MachineStatus{Phase: api.MachinePending, UpdatedAt: at(0), Conditions: []api.Condition{{Type: api.CondScheduled, Status: false, Reason: "NoRoom", Since: at(0)}}}
	mRunning := *m
	mRunning.Status = api.MachineStatus{Phase: api.MachineRunning, UpdatedAt: at(4), Conditions: []api.Condition{
		{Type: api.CondScheduled, Status: true, Since: at(2)}, {Type: api.CondProvisioned, Status: true, Since: at(4)}}}
	pool := api.NewMachinePool("p")
	pool.Status = api.MachinePoolStatus{UpdatedAt: at(3), Conditions: []api.Condition{{Type: api.CondReady, Status: false, Reason: "Provisioning", Since: at(1)}}}
	poolMsg := *pool
	poolMsg.Status = api.MachinePoolStatus{UpdatedAt: at(6), Conditions: []api.Condition{{Type: api.CondReady, Status: false, Reason: "Provisioning", Message: "1 of 2 running", Since: at(1)}}}
	ec := api.NewEtcdCluster()
	ec.Status = api.EtcdClusterStatus{UpdatedAt: at(2), Alarms: []string{"NOSPACE on cp-1"}, Conditions: []api.Condition{{Type: api.CondHealthy, Status: true, Since: at(1)}, {Type: api.CondVersionSkew, Status: true, Since: at(2)}}}
	ecCleared := *ec
	ecCleared.Status = api.EtcdClusterStatus{UpdatedAt: at(9), Conditions: ec.Status.Conditions}
	ecReclaimed := ecCleared
	ecReclaimed.Status.NoSpace = &api.NoSpaceEpisode{Members: []string{"cp-1"}, SeenAt: at(3), DBSize: 6 << 20, DBSizeQuota: 6 << 20, DBSizeAfter: 1 << 20, CompactedAt: 40, DisarmedAt: at(8)}
	ecReclaimedAgain := ecReclaimed
	ecReclaimedAgain.Status.UpdatedAt = at(12)
	full := node(api.NodeMember)
	full.Status.DataDir = &api.DataDirStatus{FreeBytes: 0, SizeBytes: 256 << 20, Full: true, MeasuredAt: at(10)}
	roomy := node(api.NodeMember)
	roomy.Status.DataDir = &api.DataDirStatus{FreeBytes: 200 << 20, SizeBytes: 256 << 20, MeasuredAt: at(11)}

	gk := api.NewGossipKey()
	gk.Spec = api.GossipKeySpec{Generation: 3, RotatedBy: "nicoctl", RotatedAt: at(8)}
	gk2 := *gk
	gk2.Spec.Generation, gk2.Spec.SecretGeneration, gk2.Spec.RotatedAt = 4, 4, at(9)

	cases := []struct {
		name      string
		key       string
		prev, cur any
		want      []string // "Type Reason node,node op @second"
		msg       string   // a part of the first event's message
	}{
		{"a join read whole is its whole journal", store.OpKey("op-join-cp-2"), nil, joinOp(5), []string{
			"Normal JoinStarted cp-2 op-join-cp-2 @0", "Normal LearnerAdded cp-2 op-join-cp-2 @1", "Normal LearnerProgress cp-2 op-join-cp-2 @2",
			"Normal Promoted cp-2 op-join-cp-2 @3", "Normal Joined cp-2 op-join-cp-2 @4"}, "join of cp-2 started, peer URL https://10.0.0.2:2380 (by coord-1)"},
		{"a change gives only the lines it added", store.OpKey("op-join-cp-2"), joinOp(2), joinOp(4), []string{
			"Normal LearnerProgress cp-2 op-join-cp-2 @2", "Normal Promoted cp-2 op-join-cp-2 @3"}, "cp-2 learner at raft index 42"},
		{"an unchanged history gives nothing", store.OpKey("op-join-cp-2"), joinOp(3), joinOp(3), nil, ""},
		{"a full history that slid on gives its new line", store.OpKey("op-join-cp-2"), longOp(false), longOp(true), []string{
			"Normal Promoted cp-2 op-join-cp-2 @100"}, ""},
		{"a failed join is a warning with its reason", store.OpKey("op-join-cp-2"), joinOp(2), failedJoin(), []string{
			"Warning JoinFailed cp-2 op-join-cp-2 @9"}, "join of cp-2 failed: learner never started within 2m"},
		{"a removal moves leadership first", store.OpKey("op-remove-cp-1"), nil, removeOp(), []string{
			"Normal RemovalStarted cp-1 op-remove-cp-1 @0", "Normal LeadershipMoved cp-1 op-remove-cp-1 @1",
			"Normal RemovingMember cp-1 op-remove-cp-1 @2", "Normal Removed cp-1 op-remove-cp-1 @3"}, "removal of cp-1 (member 0000000000000001) started"},
		{"a rollout step names its nodes", store.OpKey("rollout-r1-1"), rolloutStepOp(false), rolloutStepOp(true), []string{
			"Normal RolloutStepDone dp-1,dp-2 rollout-r1-1 @5"}, "step of rollout r1 on dp-1,dp-2 finished"},
		{"a rollout step's start", store.OpKey("rollout-r1-1"), nil, rolloutStepOp(false), []string{
			"Normal RolloutStep dp-1,dp-2 rollout-r1-1 @0"}, "rollout r1 applies its generation to dp-1,dp-2"},
		{"a deleted operation gives nothing", store.OpKey("op-join-cp-2"), joinOp(5), nil, nil, ""},
		{"a join request", store.JoinKey("cp-2"), nil, join, []string{"Normal JoinRequested cp-2 - @0"}, "cp-2 asks to join the etcd cluster (attempt 1"},
		{"an answer its operation journals gives nothing", store.JoinKey("cp-2"), join, &joinAdded, nil, ""},
		{"an answer no operation journals", store.JoinKey("cp-2"), join, &joinAdopted, []string{"Normal Joined cp-2 - @3"}, ""},
		{"a new attempt", store.JoinKey("cp-2"), join, &joinRetry, []string{"Normal JoinRequested cp-2 - @0"}, "attempt 2"},
		{"a removal refused with its reason", store.RemovalKey("cp-1"), rm, &refused, []string{"Warning Refused cp-1 - @1"},
			"removal of cp-1 refused: removing it leaves 1 of 3 voters healthy, quorum is 2"},
		{"a removal request read whole", store.RemovalKey("cp-1"), nil, &refused, []string{"Normal RemovalRequested cp-1 - @0", "Warning Refused cp-1 - @1"}, "requested by nicoctl"},
		{"the same refusal again gives nothing", store.RemovalKey("cp-1"), &refused, &refusedAgain, nil, ""},
		{"a running removal is its operation's", store.RemovalKey("cp-1"), rm, &running, nil, ""},
		{"the removed node's identity revoked", store.RemovalKey("cp-1"), &running, &revoked, []string{"Normal IdentityRevoked cp-1 op-remove-cp-1 @3"}, "certificate reaches nothing"},
		{"a node registers", store.NodeKey("cp-2"), nil, node(api.NodeJoining), []string{"Normal Registered cp-2 - @0"}, "cp-2 registered, roles controlPlane"},
		{"a node's phase changes", store.NodeKey("cp-2"), node(api.NodeJoining), node(api.NodeMember), []string{"Normal NodeMember cp-2 - @7"}, "cp-2: Joining -> Member"},
		{"a node fails", store.NodeKey("cp-2"), node(api.NodeJoining), node(api.NodeFailed), []string{"Warning NodeFailed cp-2 - @7"}, ""},
		{"a node's record is deleted", store.NodeKey("cp-2"), node(api.NodeRemoved), nil, []string{"Normal Deregistered cp-2 - @50"}, ""},
		{"liveness read whole is each node's state", store.LivenessKey, nil, liveness("cp-1", "alive", "dp-1", "dead"), []string{
			"Normal NodeAlive cp-1 - @0", "Warning NodeDead dp-1 - @2"}, "cp-1 is alive: gossip alive (seen by coord-1)"},
		{"a liveness change gives the nodes that changed", store.LivenessKey, liveness("cp-1", "alive", "dp-1", "alive"), liveness("cp-1", "alive", "dp-1", "suspect"), []string{
			"Warning NodeSuspect dp-1 - @2"}, ""},
		{"a rollout read whole", store.RolloutKey("r1"), nil, rollout(func(r *api.Rollout) {
			r.Status.Nodes[0].Phase, r.Status.Nodes[0].FinishedAt = api.NodeDone, at(3)
		}), []string{"Normal RolloutStarted - - @0", "Normal NodeUpdated dp-1 - @3"}, "rollout r1 started on 2 nodes: dp-1, cp-1"},
		{"a rollout halts", store.RolloutKey("r1"), rollout(nil), rollout(func(r *api.Rollout) {
			r.Status.Nodes[1].Phase, r.Status.Nodes[1].FinishedAt, r.Status.Nodes[1].Message = api.NodeRollFailed, at(4), "generation 7 failed"
			r.Status.Phase, r.Status.HaltedNode, r.Status.HaltedReason, r.Status.UpdatedAt = api.RolloutHalted, "cp-1", "generation 7 failed on cp-1", at(4)
		}), []string{"Warning NodeUpdateFailed cp-1 - @4", "Warning RolloutHalted cp-1 - @4"}, ""},
		{"a rollout undone rolls nodes back", store.RolloutKey("r1"), rollout(func(r *api.Rollout) { r.Status.Phase = api.RolloutUndoing }), rollout(func(r *api.Rollout) {
			r.Status.Nodes[0].Phase, r.Status.Nodes[0].FinishedAt = api.NodeReverted, at(6)
			r.Status.Phase, r.Status.FinishedAt = api.RolloutUndone, at(7)
		}), []string{"Normal RolledBack dp-1 - @6", "Normal RolloutUndone - - @7"}, "dp-1 rolled back to its configuration before rollout r1 (generation 4)"},
		{"a rollout paused and resumed", store.RolloutKey("r1"), rollout(func(r *api.Rollout) { r.Status.Phase = api.RolloutPaused }), rollout(nil), []string{
			"Normal RolloutResumed - - @1"}, ""},
		{"a generation read whole", store.NixosConfigKey("dp-1"), nil, gen, []string{"Normal GenerationApplied dp-1 - @0", "Normal GenerationApplying dp-1 - @1"}, "dp-1 runs generation 3 (/nix/store/x)"},
		{"a generation fails", store.NixosConfigKey("dp-1"), gen, &genFailed, []string{"Warning GenerationFailed dp-1 - @2"}, "generation 4 failed on dp-1: health check: unit foo failed"},
		{"a machine created", store.MachineKey("vm-0"), nil, m, []string{"Normal MachineCreated vm-0 - @0", "Warning NotScheduled vm-0 - @0"}, ""},
		{"a machine runs", store.MachineKey("vm-0"), m, &mRunning, []string{"Normal Scheduled vm-0 - @2", "Normal MachineRunning vm-0 - @4", "Normal Provisioned vm-0 - @4"}, ""},
		{"a machine deleted", store.MachineKey("vm-0"), m, nil, []string{"Normal MachineDeleted vm-0 - @50"}, ""},
		{"a condition's new message keeps its since: timed by the update", store.PoolKey("p"), pool, &poolMsg, []string{"Warning NotReady - - @6"}, "p Ready=false (Provisioning): 1 of 2 running"},
		{"the etcd cluster's conditions and alarms", store.EtcdClusterKey, nil, ec, []string{"Normal Healthy - - @1", "Warning VersionSkew - - @2", "Warning AlarmRaised - - @2"}, ""},
		{"an alarm cleared", store.EtcdClusterKey, ec, &ecCleared, []string{"Normal AlarmCleared - - @9"}, "etcd alarm NOSPACE on cp-1 cleared"},
		{"NOSPACE reclaimed", store.EtcdClusterKey, &ecCleared, &ecReclaimed, []string{"Warning NoSpaceReclaimed cp-1 - @8"},
			"NOSPACE on cp-1 from 2026-"},
		{"the same episode again gives nothing", store.EtcdClusterKey, &ecReclaimed, &ecReclaimedAgain, nil, ""},
		{"a data dir fills", store.NodeKey("cp-2"), roomy, full, []string{"Warning DataDirFull cp-2 - @10"}, "cp-2's etcd data dir is full: 0 bytes free of 268435456"},
		{"a data dir gets space back", store.NodeKey("cp-2"), full, roomy, []string{"Normal DataDirSpaceReturned cp-2 - @11"}, "209715200 bytes free"},
		{"a data dir measured first, not full", store.NodeKey("cp-2"), node(api.NodeMember), roomy, nil, ""},
		{"a gossip key rotated", store.GossipKeyKey, gk, &gk2, []string{"Normal GossipKeyRotated - - @9"}, "gossip key generation 4 (by nicoctl), from a new secret"},
		{"a gossip key unchanged", store.GossipKeyKey, gk, gk, nil, ""},
		{"a key that is no source", store.HeartbeatKey("cp-1"), nil, node(api.NodeMember), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var prev, cur []byte
			if tc.prev != nil {
				prev = enc(t, tc.prev)
			}
			if tc.cur != nil {
				cur = enc(t, tc.cur)
			}
			evs, err := Derive(Change{Key: tc.key, Prev: prev, Cur: cur, Revision: 17, At: at(50)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				op := e.Op
				if op == "" {
					op = "-"
				}
				nodes := strings.Join(e.Nodes, ",")
				if nodes == "" {
					nodes = "-"
				}
				got = append(got, fmt.Sprintf("%s %s %s %s @%d", e.Type, e.Reason, nodes, op, int(e.Time.Sub(t0).Seconds())))
				if e.Revision != 17 || e.Nodes == nil || e.Name == "" || e.Kind == "" {
					t.Errorf("event %+v: want revision 17, nodes non-nil, kind and name set", e)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.msg != "" && !strings.Contains(evs[0].Message, tc.msg) {
				t.Errorf("message %q lacks %q", evs[0].Message, tc.msg)
			}
		})
	}
}

func TestDeriveBadValue(t *testing.T) {
	_, err := Derive(Change{Key: store.OpKey("x"), Cur: []byte("{"), Revision: 3})
	if err == nil || !strings.Contains(err.Error(), "ops/x at revision 3") {
		t.Fatalf("err = %v, want one naming the key and revision", err)
	}
}

// TestRange: one read and one watch of Range see every source, and
// Watched leaves out the other keys in it.
func TestRange(t *testing.T) {
	start, end := Range()
	for _, s := range sources {
		k := s.key
		if strings.HasSuffix(k, "/") {
			k += "x"
		}
		if k < start || k >= end || !Watched(k) {
			t.Errorf("source key %q outside [%q, %q) or not watched", k, start, end)
		}
	}
	for _, k := range []string{store.HeartbeatKey("a"), store.ActiveOpKey, store.NudgeKey, store.OpsDir, "tokens/x", store.JoinNonceKey("d")} {
		if Watched(k) {
			t.Errorf("%q is watched", k)
		}
	}
}

// TestEventJSON: the JSON form's fields are all there, in this order.
func TestEventJSON(t *testing.T) {
	b, err := json.Marshal(Event{Time: t0, Kind: "Node", Name: "a", Type: Normal, Reason: Registered, Message: "m", Nodes: []string{}, Revision: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-01-02T03:04:05Z","kind":"Node","name":"a","type":"Normal","reason":"Registered","message":"m","nodes":[],"op":"","revision":5}`
	if string(b) != want {
		t.Fatalf("json = %s\nwant %s", b, want)
	}
}

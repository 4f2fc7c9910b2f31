package kubeplan

import (
	"strings"
	"testing"
)

func ready(name string) Member {
	ok := Probe{Reported: true, Healthy: true}
	return Member{Name: name, Applied: true, APIServer: ok, ControllerManager: ok, Scheduler: ok}
}

func TestJudge(t *testing.T) {
	sel := Selection{ControlPlane: []string{"cp-1", "cp-2"}, DataPlane: []string{"dp-1"}}
	cps := func(mod func([]Member)) []Member {
		ms := []Member{ready("cp-1"), ready("cp-2")}
		if mod != nil {
			mod(ms)
		}
		return ms
	}
	dps := []Member{{Name: "dp-1", Applied: true}}
	// want is the phase and, in ConditionOrder, each condition as
	// "T" or "F:<reason>".
	tests := []struct {
		name    string
		f       Facts
		phase   Phase
		want    string
		message string
	}{
		{name: "all ready", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps},
			phase: Ready, want: "T T T T T T"},
		{name: "etcd down holds everything behind it", f: Facts{Selection: sel, ControlPlane: cps(nil), DataPlane: dps},
			phase: Provisioning, want: "F:NotReady F:WaitingForEtcd F:WaitingForAPIServer F:WaitingForAPIServer F:NotReady F:WaitingForAPIServer"},
		{name: "one API server not ready", f: Facts{Selection: sel, EtcdReady: true, DataPlane: dps,
			ControlPlane: cps(func(ms []Member) { ms[1].APIServer = Probe{Reported: true, Message: "readyz 500"} })},
			phase: Provisioning, want: "T F:NotReady F:WaitingForAPIServer F:WaitingForAPIServer F:NotReady F:WaitingForAPIServer", message: "readyz 500"},
		{name: "a configuration not applied yet", f: Facts{Selection: sel, EtcdReady: true, DataPlane: dps,
			ControlPlane: cps(func(ms []Member) { ms[0].Applied = false })},
			phase: Provisioning, want: "T F:NotReady F:WaitingForAPIServer F:WaitingForAPIServer F:NotReady F:WaitingForAPIServer", message: "cp-1: configuration not applied yet"},
		{name: "scheduler not reported", f: Facts{Selection: sel, EtcdReady: true, DataPlane: dps,
			ControlPlane: cps(func(ms []Member) { ms[0].Scheduler = Probe{} })},
			phase: Provisioning, want: "T T T F:NotReady F:NotReady F:WaitingForControlPlane", message: "cp-1: not reported yet"},
		{name: "data plane not applied", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: []Member{{Name: "dp-1"}}},
			phase: Provisioning, want: "T T T T T F:NotReady"},
		{name: "no data plane", f: Facts{Selection: Selection{ControlPlane: sel.ControlPlane}, EtcdReady: true, ControlPlane: cps(nil)},
			phase: Ready, want: "T T T T T T"},
		{name: "waiting for machines names the number missing", f: Facts{Selection: Selection{MissingControlPlane: 3, MissingDataPlane: 2}, EtcdReady: true},
			phase: Provisioning, want: "T F:WaitingForMachines F:WaitingForAPIServer F:WaitingForAPIServer F:WaitingForMachines F:WaitingForMachines", message: "5 machines missing"},
		{name: "a named machine does not exist", f: Facts{Selection: Selection{ControlPlane: []string{"cp-1"}, Unknown: []string{"cp-9"}}, EtcdReady: true, ControlPlane: cps(nil)[:1]},
			phase: Failed, want: "T T T T F:MachineNotFound F:WaitingForControlPlane", message: "cp-9"},
		{name: "a halted rollout fails the cluster", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps, Halted: "generation 2 failed on cp-1"},
			phase: Failed, want: "T T T T T T", message: "generation 2 failed"},
		{name: "nodes observed, all Ready", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Ready: true, Status: "True"}}},
			phase: Ready, want: "T T T T T T", message: "1 of 1 data-plane machines ready"},
		{name: "a data-plane Node not registered", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, Nodes: map[string]NodeState{}},
			phase: Provisioning, want: "T T T T T F:NodeNotReady", message: "dp-1: Node not registered"},
		{name: "a data-plane Node NotReady names the kubelet's reason", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Status: "False", Reason: "KubeletNotReady", Message: "container runtime network not ready"}}},
			phase: Provisioning, want: "T T T T T F:NodeNotReady", message: "dp-1: Node NotReady: KubeletNotReady: container runtime network not ready"},
		{name: "a data-plane Node that stopped reporting", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Status: "Unknown", Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}},
			phase: Provisioning, want: "T T T T T F:NodeNotReady", message: "dp-1: Node Unknown: NodeStatusUnknown"},
		{name: "Nodes not read hold the data plane", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, NodesError: "connection refused"},
			phase: Provisioning, want: "T T T T T F:NodeNotReady", message: "dp-1: Nodes not read: connection refused"},
		{name: "a control-plane machine without a Node counts, one NotReady does not", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps,
			NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Ready: true, Status: "True"}, "cp-2": {Status: "False", Reason: "KubeletNotReady"}}},
			phase: Provisioning, want: "T T T T F:NodeNotReady F:WaitingForControlPlane", message: "1 of 2 control-plane machines ready; cp-2: Node NotReady: KubeletNotReady"},
		{name: "a machine not applied yet is not judged by its Node", f: Facts{Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: []Member{{Name: "dp-1"}},
			NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Ready: true, Status: "True"}}},
			phase: Provisioning, want: "T T T T T F:NotReady", message: "0 of 1 data-plane machines run"},
		{name: "deleting", f: Facts{Deleting: true, Selection: sel, EtcdReady: true, ControlPlane: cps(nil), DataPlane: dps},
			phase: Deleting, want: "T T T T T T"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Judge(tt.f)
			var got []string
			for i, c := range s.Conditions {
				if c.Type != ConditionOrder[i] {
					t.Fatalf("condition %d is %s, want %s", i, c.Type, ConditionOrder[i])
				}
				if c.Status {
					got = append(got, "T")
				} else {
					got = append(got, "F:"+c.Reason)
				}
			}
			if s.Phase != tt.phase || strings.Join(got, " ") != tt.want {
				t.Fatalf("phase %s conditions %s, want %s %s\n%+v", s.Phase, strings.Join(got, " "), tt.phase, tt.want, s)
			}
			all := s.Message
			for _, c := range s.Conditions {
				all += "\n" + c.Message
			}
			if !strings.Contains(all, tt.message) {
				t.Fatalf("messages lack %q:\n%s", tt.message, all)
			}
		})
	}
}

// TestJudgeCounts: per component, how many replicas are ready on which
// machines, and the leader.
func TestJudgeCounts(t *testing.T) {
	a, b := ready("cp-1"), ready("cp-2")
	b.ControllerManager = Probe{Reported: true, Message: "healthz: connection refused"}
	a.ControllerManager.Leader = true
	s := Judge(Facts{Selection: Selection{ControlPlane: []string{"cp-1", "cp-2"}}, EtcdReady: true, ControlPlane: []Member{a, b}})
	if s.ControllerManager.Ready != 1 || s.ControllerManager.Total != 2 || s.ControllerManager.ReadyMachines[0] != "cp-1" {
		t.Fatalf("controller-manager %+v", s.ControllerManager)
	}
	if m := s.Condition(ControllerManagerReady).Message; !strings.Contains(m, "1 of 2") || !strings.Contains(m, "leader cp-1") || !strings.Contains(m, "connection refused") {
		t.Fatalf("message %q", m)
	}
	if s.APIServer.Ready != 2 || s.ControlPlane.Ready != 2 {
		t.Fatalf("api %+v cp %+v", s.APIServer, s.ControlPlane)
	}
}

// TestJudgeNodeCounts: readyMachines holds a machine only when its Node is
// Ready.
func TestJudgeNodeCounts(t *testing.T) {
	s := Judge(Facts{Selection: Selection{ControlPlane: []string{"cp-1"}, DataPlane: []string{"dp-1", "dp-2"}}, EtcdReady: true,
		ControlPlane: []Member{ready("cp-1")}, DataPlane: []Member{{Name: "dp-1", Applied: true}, {Name: "dp-2", Applied: true}},
		NodesObserved: true, Nodes: map[string]NodeState{"dp-1": {Ready: true, Status: "True"}, "dp-2": {Status: "False", Reason: "KubeletNotReady"}}})
	if s.DataPlane.Ready != 1 || s.DataPlane.Total != 2 || len(s.DataPlane.ReadyMachines) != 1 || s.DataPlane.ReadyMachines[0] != "dp-1" {
		t.Fatalf("data plane %+v", s.DataPlane)
	}
	if s.Phase != Provisioning || !strings.Contains(s.Message, "dp-2: Node NotReady: KubeletNotReady") {
		t.Fatalf("phase %s message %q", s.Phase, s.Message)
	}
}

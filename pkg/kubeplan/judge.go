package kubeplan

import (
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Phase is where a cluster is in its life (the package's diagram).
type Phase = api.ClusterPhase

// Phases.
const (
	Provisioning = api.ClusterProvisioning
	Ready        = api.ClusterReady
	Failed       = api.ClusterFailed
	Deleting     = api.ClusterDeleting
)

// Condition types, in dependency order.
const (
	EtcdReady              = api.CondEtcdReady
	APIServerReady         = api.CondAPIServerReady
	ControllerManagerReady = api.CondControllerManagerReady
	SchedulerReady         = api.CondSchedulerReady
	ControlPlaneReady      = api.CondControlPlaneReady
	DataPlaneReady         = api.CondDataPlaneReady
)

// ConditionOrder lists the condition types in the order they come true.
var ConditionOrder = []string{EtcdReady, APIServerReady, ControllerManagerReady, SchedulerReady, ControlPlaneReady, DataPlaneReady}

// Condition reasons.
const (
	ReasonWaitingForMachines  = api.ReasonWaitingForMachines
	ReasonMachineNotFound     = api.ReasonMachineNotFound
	ReasonWaitingForEtcd      = "WaitingForEtcd"
	ReasonWaitingForAPIServer = "WaitingForAPIServer"
	ReasonWaitingForControl   = "WaitingForControlPlane"
	ReasonRolloutHalted       = "RolloutHalted"
	ReasonReady               = "Ready"
	ReasonNotReady            = "NotReady"
	// ReasonNodeNotReady: a machine's Node is missing or not Ready.
	ReasonNodeNotReady = "NodeNotReady"
	ReasonNoDataPlane  = "NoDataPlane"
	ReasonDeleting     = "Deleting"
)

// Probe is what a machine's agent last reported of one component.
type Probe struct {
	// Reported: a report of the component exists.
	Reported bool
	Healthy  bool
	// Leader: the machine holds the component's leader lease.
	Leader  bool
	Message string
}

// NodeState is the Ready condition of the Node named after a machine,
// as the cluster's API server holds it.
type NodeState struct {
	Ready bool
	// Status is the condition's status ("" when the kubelet reported
	// none yet); Reason and Message are the kubelet's own.
	Status, Reason, Message string
}

// Member is one selected machine as observed.
type Member struct {
	Name string
	// Applied: the machine runs the cluster's current configuration.
	Applied                                 bool
	APIServer, ControllerManager, Scheduler Probe
}

// Facts is what Judge reads.
type Facts struct {
	Deleting  bool
	Selection Selection
	// EtcdReady: the cluster's datastore serves (for nico's etcd: it has a
	// leader, its voters are healthy, and the cluster's identity exists).
	EtcdReady   bool
	EtcdMessage string
	// ControlPlane and DataPlane are the selected machines, in the
	// selection's order.
	ControlPlane, DataPlane []Member
	// Halted is the reason the cluster's last rollout halted ("" none).
	Halted string
	// NodesObserved: the cluster's Nodes are judged (the controller
	// reaches the cluster's API). A data-plane machine then counts as
	// ready only when its Node (named after it) is Ready, and a
	// control-plane machine whose Node exists only when it is Ready (a
	// control-plane machine may run no kubelet). Unobserved, a machine
	// counts once it runs the cluster's configuration.
	NodesObserved bool
	// Nodes are the cluster's Nodes by name; NodesError why they could
	// not be read ("" when read).
	Nodes      map[string]NodeState
	NodesError string
}

// nodeProblem is why machine m's Node does not let it count as ready
// ("" when it does); mustExist for the data plane.
func (f Facts) nodeProblem(m string, mustExist bool) string {
	if !f.NodesObserved {
		return ""
	}
	if f.NodesError != "" {
		if !mustExist {
			return ""
		}
		return "Nodes not read: " + f.NodesError
	}
	n, ok := f.Nodes[m]
	switch {
	case !ok && mustExist:
		return "Node not registered"
	case !ok, n.Ready:
		return ""
	case n.Status == "":
		return "Node has no Ready condition yet"
	}
	msg := "Node " + n.Status
	if n.Status == "False" {
		msg = "Node NotReady"
	}
	if n.Reason != "" {
		msg += ": " + n.Reason
	}
	if n.Message != "" {
		msg += ": " + n.Message
	}
	return msg
}

// Condition is one observation about the cluster.
type Condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// Count is how many of a part's machines (or a component's replicas) are
// ready, and on which machines.
type Count struct {
	Ready, Total  int
	ReadyMachines []string
}

// Status is the cluster's status as Judge derives it.
type Status struct {
	Phase   Phase
	Message string
	// Conditions are in ConditionOrder.
	Conditions                              []Condition
	ControlPlane, DataPlane                 Count
	APIServer, ControllerManager, Scheduler Count
}

// Condition returns the condition of type t (zero when absent).
func (s Status) Condition(t string) Condition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return Condition{Type: t}
}

// Judge derives the phase and conditions from f. A condition is true only
// when the one it depends on is: etcd, then the API servers (every
// control-plane machine runs the cluster's configuration and its /readyz
// answers), then controller-manager and scheduler (every replica healthy),
// then the data plane (the control plane ready and every data-plane
// machine running its configuration and, with NodesObserved, its Node
// Ready; the condition names each machine whose Node is missing or not
// Ready with the kubelet's reason and message).
func Judge(f Facts) Status {
	var s Status
	apiserver := func(m Member) Probe { return m.APIServer }
	cm := func(m Member) Probe { return m.ControllerManager }
	sched := func(m Member) Probe { return m.Scheduler }
	s.APIServer = countProbe(f.ControlPlane, apiserver)
	s.ControllerManager = countProbe(f.ControlPlane, cm)
	s.Scheduler = countProbe(f.ControlPlane, sched)
	sel := f.Selection

	etcd := Condition{Type: EtcdReady, Status: f.EtcdReady, Reason: ReasonReady, Message: f.EtcdMessage}
	if !f.EtcdReady {
		etcd.Reason = ReasonNotReady
	}
	api := Condition{Type: APIServerReady, Reason: ReasonWaitingForMachines, Message: "no control-plane machine selected yet"}
	if len(f.ControlPlane) > 0 {
		api = component(APIServerReady, "API server", f.ControlPlane, apiserver, s.APIServer, etcd, ReasonWaitingForEtcd)
	}
	cmc := component(ControllerManagerReady, "controller-manager", f.ControlPlane, cm, s.ControllerManager, api, ReasonWaitingForAPIServer)
	sc := component(SchedulerReady, "scheduler", f.ControlPlane, sched, s.Scheduler, api, ReasonWaitingForAPIServer)

	cp := Condition{Type: ControlPlaneReady, Status: etcd.Status && api.Status && cmc.Status && sc.Status, Reason: ReasonReady}
	switch {
	case len(sel.Unknown) > 0:
		cp.Status, cp.Reason, cp.Message = false, ReasonMachineNotFound, "machines do not exist: "+describe(sel.Unknown)
	case sel.MissingControlPlane > 0 || len(sel.Held) > 0:
		cp.Status, cp.Reason = false, ReasonWaitingForMachines
		cp.Message = fmt.Sprintf("waiting for %s", plural(sel.MissingControlPlane+len(sel.Held), "control-plane machine"))
		if len(sel.Held) > 0 {
			cp.Message += " (held by another cluster: " + describe(sel.Held) + ")"
		}
	case !cp.Status:
		cp.Reason = ReasonNotReady
		cp.Message = "waiting for " + firstFalse(etcd, api, cmc, sc)
	default:
		cp.Message = fmt.Sprintf("%d of %d control-plane machines ready", len(f.ControlPlane), len(f.ControlPlane))
	}
	s.ControlPlane = countMembers(f.ControlPlane, func(m Member) bool {
		return m.Applied && m.APIServer.Healthy && f.nodeProblem(m.Name, false) == ""
	})
	if cp.Status {
		var bad []string
		for _, m := range f.ControlPlane {
			if p := f.nodeProblem(m.Name, false); p != "" {
				bad = append(bad, m.Name+": "+p)
			}
		}
		if len(bad) > 0 {
			cp.Status, cp.Reason = false, ReasonNodeNotReady
			cp.Message = fmt.Sprintf("%d of %d control-plane machines ready; %s", s.ControlPlane.Ready, s.ControlPlane.Total, strings.Join(bad, "; "))
		}
	}

	var dpBad []string
	s.DataPlane = countMembers(f.DataPlane, func(m Member) bool {
		if !m.Applied {
			return false
		}
		if p := f.nodeProblem(m.Name, true); p != "" {
			dpBad = append(dpBad, m.Name+": "+p)
			return false
		}
		return true
	})
	dp := Condition{Type: DataPlaneReady, Reason: ReasonReady}
	switch {
	case sel.MissingDataPlane > 0:
		dp.Reason, dp.Message = ReasonWaitingForMachines, fmt.Sprintf("waiting for %s", plural(sel.MissingDataPlane, "data-plane machine"))
	case !api.Status:
		dp.Reason, dp.Message = ReasonWaitingForAPIServer, "the data plane rolls once the API servers are ready"
	case !cp.Status:
		dp.Reason, dp.Message = ReasonWaitingForControl, "waiting for "+ControlPlaneReady
	case len(f.DataPlane) == 0:
		dp.Status, dp.Reason, dp.Message = true, ReasonNoDataPlane, "the cluster has no data-plane machine"
	case len(dpBad) > 0:
		dp.Reason, dp.Message = ReasonNodeNotReady, fmt.Sprintf("%d of %d data-plane machines ready; %s", s.DataPlane.Ready, s.DataPlane.Total, strings.Join(dpBad, "; "))
	case s.DataPlane.Ready < s.DataPlane.Total:
		dp.Reason, dp.Message = ReasonNotReady, fmt.Sprintf("%d of %d data-plane machines run the cluster's configuration", s.DataPlane.Ready, s.DataPlane.Total)
	default:
		dp.Status, dp.Message = true, fmt.Sprintf("%d of %d data-plane machines ready", s.DataPlane.Ready, s.DataPlane.Total)
	}
	s.Conditions = []Condition{etcd, api, cmc, sc, cp, dp}

	switch {
	case f.Deleting:
		s.Phase, s.Message = Deleting, "releasing the cluster's machines and deleting its secrets"
	case len(sel.Unknown) > 0:
		s.Phase, s.Message = Failed, "machines do not exist: "+describe(sel.Unknown)
	case f.Halted != "":
		s.Phase, s.Message = Failed, "rollout halted: "+f.Halted
	case cp.Status && dp.Status:
		s.Phase, s.Message = Ready, "control plane and data plane ready"
	default:
		s.Phase = Provisioning
		if n := sel.Missing(); n > 0 {
			s.Message = fmt.Sprintf("%s: %s missing", ReasonWaitingForMachines, plural(n, "machine"))
		} else if !cp.Status {
			s.Message = cp.Message
		} else {
			s.Message = dp.Message
		}
	}
	return s
}

// component is the condition of a component that needs dep: false with
// reason waiting while dep is false, else true when every control-plane
// machine's replica is ready.
func component(typ, what string, ms []Member, probe func(Member) Probe, c Count, dep Condition, waiting string) Condition {
	out := Condition{Type: typ}
	if !dep.Status {
		out.Reason, out.Message = waiting, "waiting for "+dep.Type
		return out
	}
	if c.Total == 0 {
		out.Reason, out.Message = ReasonWaitingForMachines, "no control-plane machine selected yet"
		return out
	}
	var bad, leaders []string
	for _, m := range ms {
		p := probe(m)
		if p.Leader {
			leaders = append(leaders, m.Name)
		}
		switch {
		case !m.Applied:
			bad = append(bad, m.Name+": configuration not applied yet")
		case !p.Reported:
			bad = append(bad, m.Name+": not reported yet")
		case !p.Healthy:
			bad = append(bad, m.Name+": "+p.Message)
		}
	}
	out.Message = fmt.Sprintf("%d of %d %ss ready", c.Ready, c.Total, what)
	if len(c.ReadyMachines) > 0 {
		out.Message += " (" + describe(c.ReadyMachines) + ")"
	}
	if len(leaders) > 0 {
		out.Message += "; leader " + describe(leaders)
	}
	if len(bad) > 0 {
		out.Reason = ReasonNotReady
		out.Message += "; " + strings.Join(bad, "; ")
		return out
	}
	out.Status, out.Reason = true, ReasonReady
	return out
}

func countProbe(ms []Member, probe func(Member) Probe) Count {
	return countMembers(ms, func(m Member) bool { return m.Applied && probe(m).Healthy })
}

func countMembers(ms []Member, ready func(Member) bool) Count {
	c := Count{Total: len(ms)}
	for _, m := range ms {
		if ready(m) {
			c.Ready++
			c.ReadyMachines = append(c.ReadyMachines, m.Name)
		}
	}
	return c
}

func firstFalse(cs ...Condition) string {
	for _, c := range cs {
		if !c.Status {
			return c.Type
		}
	}
	return ""
}

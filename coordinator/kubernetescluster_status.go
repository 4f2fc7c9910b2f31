package coordinator

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
)

// statusUpdate is what a cluster's status is made from.
type statusUpdate struct {
	judged     kubeplan.Status
	facts      kubeplan.Facts
	sel        kubeplan.Selection
	endpoint   string
	kubeconfig string
	rollouts   []*api.Rollout
	// inSync: every machine runs the cluster's configuration.
	inSync bool
	// drained is CondMachinesDrained when machines were released this
	// pass with spec.drain set (nil: none); idle: nothing to do, and a
	// false CondMachinesDrained (a held machine taken back) turns true.
	drained *kubeplan.Condition
	idle    bool
	// published is CondKubeconfigPublished (spec.kubeconfig.path set,
	// the control plane ready), nil: left as it is.
	published *kubeplan.Condition
}

// writeStatus writes kc's status when it changed, fenced and only while
// kc is as read (a person's apply meanwhile wins; the next pass answers
// it), with the generation it answers.
func (cc *clusterController) writeStatus(ctx context.Context, kc *api.KubernetesCluster, u statusUpdate) error {
	now := cc.now().UTC()
	old := kc.Status
	st := old
	st.Phase, st.Message = u.judged.Phase, u.judged.Message
	st.ObservedGeneration = kc.Metadata.Generation
	st.ControlPlane = replicas(u.judged.ControlPlane, u.sel.ControlPlane)
	st.DataPlane = replicas(u.judged.DataPlane, u.sel.DataPlane)
	st.Components = []api.ComponentStatus{
		{Name: api.ComponentEtcd, ReplicaStatus: etcdReplicas(u.facts), Message: u.facts.EtcdMessage},
		component(api.ComponentAPIServer, u.judged.APIServer, u.sel.ControlPlane, u.judged.Condition(kubeplan.APIServerReady), u.facts, nil),
		component(api.ComponentControllerManager, u.judged.ControllerManager, u.sel.ControlPlane, u.judged.Condition(kubeplan.ControllerManagerReady), u.facts,
			func(m kubeplan.Member) bool { return m.ControllerManager.Leader }),
		component(api.ComponentScheduler, u.judged.Scheduler, u.sel.ControlPlane, u.judged.Condition(kubeplan.SchedulerReady), u.facts,
			func(m kubeplan.Member) bool { return m.Scheduler.Leader }),
	}
	if u.kubeconfig != "" {
		st.KubeconfigSecret = u.kubeconfig
	}
	st.ControlPlaneEndpoint = u.endpoint
	if u.inSync {
		st.Version = kc.Spec.Version
	}
	if n := len(u.rollouts); n > 0 {
		st.Rollout = u.rollouts[n-1].Metadata.Name
	}
	st.Conditions = slices.Clone(old.Conditions)
	for _, c := range u.judged.Conditions {
		status := api.ConditionFalse
		if c.Status {
			status = api.ConditionTrue
		}
		st.Conditions, _ = api.SetClusterCondition(st.Conditions, api.ClusterCondition{Type: c.Type, Status: status, Reason: c.Reason,
			Message: c.Message, LastTransitionTime: now, ObservedGeneration: kc.Metadata.Generation})
	}
	if c := u.drained; c != nil {
		st.Conditions, _ = api.SetClusterCondition(st.Conditions, api.ClusterCondition{Type: c.Type, Status: condStatus(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: now, ObservedGeneration: kc.Metadata.Generation})
	} else if c := api.FindClusterCondition(st.Conditions, api.CondMachinesDrained); c != nil && u.idle && c.Status != api.ConditionTrue {
		st.Conditions, _ = api.SetClusterCondition(st.Conditions, api.ClusterCondition{Type: api.CondMachinesDrained, Status: api.ConditionTrue,
			Reason: api.ReasonDrained, Message: "no machine left to drain", LastTransitionTime: now, ObservedGeneration: kc.Metadata.Generation})
	}
	if c := u.published; c != nil {
		st.Conditions, _ = api.SetClusterCondition(st.Conditions, api.ClusterCondition{Type: c.Type, Status: condStatus(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: now, ObservedGeneration: kc.Metadata.Generation})
	}
	st.UpdatedAt = old.UpdatedAt
	if reflect.DeepEqual(st, old) {
		return nil
	}
	st.UpdatedAt = now
	next := *kc
	next.Status = st
	if old.Phase != st.Phase {
		cc.logger.Info("kubernetes cluster phase", "cluster", kc.Metadata.Name, "from", string(old.Phase), "to", string(st.Phase), "message", st.Message)
	}
	if err := cc.putGuarded(ctx, &next); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

func condStatus(b bool) api.ConditionStatus {
	if b {
		return api.ConditionTrue
	}
	return api.ConditionFalse
}

// replicas is a plane's count with its machines, sorted.
func replicas(c kubeplan.Count, machines []string) api.ReplicaStatus {
	r := api.ReplicaStatus{Ready: c.Ready, Total: c.Total, ReadyMachines: slices.Clone(c.ReadyMachines), Machines: slices.Clone(machines)}
	slices.Sort(r.ReadyMachines)
	slices.Sort(r.Machines)
	return r
}

func etcdReplicas(f kubeplan.Facts) api.ReplicaStatus {
	if f.EtcdReady {
		return api.ReplicaStatus{Ready: 1, Total: 1}
	}
	return api.ReplicaStatus{Total: 1}
}

// component is one control-plane component's status: its replicas, the
// machine holding its leader lease, and its condition's message.
func component(name string, c kubeplan.Count, machines []string, cond kubeplan.Condition, f kubeplan.Facts, leads func(kubeplan.Member) bool) api.ComponentStatus {
	s := api.ComponentStatus{Name: name, ReplicaStatus: replicas(c, machines), Message: cond.Message}
	if leads != nil {
		for _, m := range f.ControlPlane {
			if leads(m) {
				s.Leader = m.Name
				break
			}
		}
	}
	return s
}

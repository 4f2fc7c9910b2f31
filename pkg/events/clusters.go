package events

import (
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of KubernetesClusters. A condition's event is named after its
// type when it is True (APIServerReady...) and "Not" + its type otherwise.
const (
	ClusterCreated       = "ClusterCreated"
	ClusterSpecChanged   = "ClusterSpecChanged"
	ClusterDeleteMarked  = "ClusterDeletionRequested"
	ClusterDeleted       = "ClusterDeleted"
	ClusterPhasePrefix   = "Cluster" // + the new phase: ClusterReady...
	clusterTimeFormatUTC = "2006-01-02T15:04:05Z"
)

// deriveCluster: a cluster's creation, each new generation of its spec
// while watched, its phase changes, its conditions (timed at their
// lastTransitionTime, so that a cluster read whole tells its history in
// order), the request to delete it and its deletion.
func deriveCluster(c Change) ([]Event, error) {
	prev, cur, err := decode[api.KubernetesCluster](c)
	if err != nil {
		return nil, err
	}
	name := store.Name(c.Key)
	kind := api.KindKubernetesCluster
	if cur == nil {
		if prev == nil {
			return nil, nil
		}
		return []Event{c.event(c.At, kind, name, Normal, ClusterDeleted, "KubernetesCluster "+name+" deleted: nothing of it is left", "")}, nil
	}
	var out []Event
	st := cur.Status
	if prev == nil {
		out = append(out, c.event(cur.Metadata.CreatedAt, kind, name, Normal, ClusterCreated,
			fmt.Sprintf("KubernetesCluster %s created (generation %d, version %s)", name, cur.Metadata.Generation, orDash(cur.Spec.Version)), ""))
	} else if cur.Metadata.Generation != prev.Metadata.Generation {
		out = append(out, c.event(c.At, kind, name, Normal, ClusterSpecChanged,
			fmt.Sprintf("KubernetesCluster %s spec changed: generation %d -> %d", name, prev.Metadata.Generation, cur.Metadata.Generation), ""))
	}
	if prev != nil && prev.Status.Phase != st.Phase && st.Phase != "" {
		typ := Normal
		if st.Phase == api.ClusterFailed {
			typ = Warning
		}
		msg := fmt.Sprintf("KubernetesCluster %s: %s -> %s", name, orDash(string(prev.Status.Phase)), st.Phase)
		if st.Message != "" {
			msg += ": " + st.Message
		}
		out = append(out, c.event(st.UpdatedAt, kind, name, typ, ClusterPhasePrefix+string(st.Phase), msg, ""))
	}
	if d := cur.Metadata.DeletionTimestamp; d != nil && (prev == nil || prev.Metadata.DeletionTimestamp == nil) {
		out = append(out, c.event(*d, kind, name, Normal, ClusterDeleteMarked,
			"KubernetesCluster "+name+" marked for deletion at "+d.UTC().Format(clusterTimeFormatUTC), ""))
	}
	var old []api.ClusterCondition
	if prev != nil {
		old = prev.Status.Conditions
	}
	return append(out, clusterConditionEvents(c, name, old, st)...), nil
}

// clusterConditionEvents returns an event for each condition of st that is
// new or changed from prev.
func clusterConditionEvents(c Change, name string, prev []api.ClusterCondition, st api.KubernetesClusterStatus) []Event {
	var out []Event
	for _, k := range st.Conditions {
		old := api.FindClusterCondition(prev, k.Type)
		if old != nil && old.Status == k.Status && old.Reason == k.Reason && old.Message == k.Message {
			continue
		}
		at := k.LastTransitionTime
		if (old != nil && old.Status == k.Status) || at.IsZero() {
			at = st.UpdatedAt
		}
		typ, reason := Normal, k.Type
		if k.Status != api.ConditionTrue {
			typ, reason = Warning, "Not"+k.Type
		}
		msg := fmt.Sprintf("%s %s=%s", name, k.Type, k.Status)
		if k.Reason != "" {
			msg += " (" + k.Reason + ")"
		}
		if k.Message != "" {
			msg += ": " + k.Message
		}
		out = append(out, c.event(at, api.KindKubernetesCluster, name, typ, reason, msg, ""))
	}
	return out
}

package statuspage

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// KubernetesRow is one KubernetesCluster: its phase, versions, planes,
// components and conditions as the leader's controller last wrote them.
type KubernetesRow struct {
	Name  string
	Phase api.ClusterPhase
	// Version is the version asked for; Running the one every machine has
	// applied ("" until the first full roll).
	Version, Running string
	Endpoint         string
	ControlPlane     api.ReplicaStatus
	DataPlane        api.ReplicaStatus
	Components       []api.ComponentStatus
	Conditions       []api.ClusterCondition
	Rollout          string
	// Kubeconfig names the secret holding the admin kubeconfig (never its
	// contents), once written.
	Kubeconfig string
	Deleting   bool
	Message    string
}

// readKubernetes lists the KubernetesCluster objects.
func readKubernetes(ctx context.Context, st *store.Store) ([]KubernetesRow, error) {
	cs, _, err := store.List[api.KubernetesCluster](ctx, st, store.ClustersDir)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clusters: %w", err)
	}
	rows := make([]KubernetesRow, 0, len(cs))
	for _, c := range cs {
		s := c.Status
		rows = append(rows, KubernetesRow{Name: c.Metadata.Name, Phase: s.Phase, Version: c.Spec.Version, Running: s.Version,
			Endpoint: s.ControlPlaneEndpoint, ControlPlane: s.ControlPlane, DataPlane: s.DataPlane, Components: s.Components,
			Conditions: s.Conditions, Rollout: s.Rollout, Kubeconfig: s.KubeconfigSecret, Deleting: c.Deleting(), Message: s.Message})
	}
	return rows, nil
}

package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// snapshotBeforeDeletion takes the snapshot a deleted cluster's data is
// kept in before it leaves nico's etcd (provider nico: its keys under
// /clusters/<c>/), as spec.snapshots.beforeChange says for any change:
// Required holds the deletion until one is taken (held true), BestEffort
// goes on after a failure, Off and no spec.snapshots take none. Other
// providers keep no data in nico's etcd.
func (cc *clusterController) snapshotBeforeDeletion(ctx context.Context, kc *api.KubernetesCluster) (held bool, err error) {
	if kc.Spec.Etcd.ProviderOrDefault() != api.EtcdProviderNico {
		return false, nil
	}
	ec := &api.EtcdCluster{}
	if err := cc.st.Get(ctx, store.EtcdClusterKey, ec); errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	what := fmt.Sprintf("deletion of cluster %s's data under /clusters/%s/", kc.Metadata.Name, kc.Metadata.Name)
	note, err := cc.snaps.before(ctx, cc.fence, ec, what)
	if errors.Is(err, errSnapshotHeld) {
		cc.logger.Warn("cluster deletion waits for a snapshot", "cluster", kc.Metadata.Name, "err", err)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if note != "" {
		cc.logger.Info("before deleting a cluster's data", "cluster", kc.Metadata.Name, "snapshot", note)
	}
	return false, nil
}

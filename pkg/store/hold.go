package store

import (
	"context"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Hold says whether a restore or a recovery holds the cluster, and why;
// "" when none does. The coordinators plan nothing on a held cluster:
//
//   - ClusterIDKey names another cluster than the one that answers: the
//     cluster was restored from a snapshot and its restore has not handed
//     it over yet (true from the restored member's first start, as the
//     snapshot carries the old cluster's ID);
//   - the operation in flight is a running restore or recovery.
//
// recorded is false when ClusterIDKey is absent (a fleet that has not
// recorded its cluster yet); id is the answering cluster's ID.
func (s *Store) Hold(ctx context.Context) (why string, recorded bool, id uint64, err error) {
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(ClusterIDKey), clientv3.OpGet(ActiveOpKey)).Commit()
	if err != nil {
		return "", false, 0, fmt.Errorf("store: read the cluster's hold: %w", err)
	}
	id = resp.Header.ClusterId
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		recorded = true
		if want := string(kvs[0].Value); want != FormatClusterID(id) {
			return fmt.Sprintf("cluster %s answers, the fleet's cluster is %s: restored data not yet handed over by its restore", FormatClusterID(id), want), true, id, nil
		}
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", recorded, id, nil
	}
	op, err := s.OpAt(ctx, string(kvs[0].Value), resp.Header.Revision)
	if err != nil {
		return "", recorded, id, err
	}
	if t := op.Spec.Type; (t == api.OpRestore || t == api.OpRecover) && op.Status.Phase == api.OpRunning {
		return fmt.Sprintf("%s %s holds the cluster (step %s)", t, op.Metadata.Name, op.Status.Step), recorded, id, nil
	}
	return "", recorded, id, nil
}

// FormatClusterID is how ClusterIDKey holds a cluster ID.
func FormatClusterID(id uint64) string { return fmt.Sprintf("%016x", id) }

// RecordClusterIDOp records id as the cluster the coordinators act on.
func RecordClusterIDOp(id uint64) clientv3.Op {
	return clientv3.OpPut(ClusterIDKey, FormatClusterID(id))
}

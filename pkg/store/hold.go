package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
//
// seen, when not nil, saves the read of the operation in flight while it
// stays the one seen not to hold the cluster (see HoldSeen).
func (s *Store) Hold(ctx context.Context, seen *HoldSeen) (why string, recorded bool, id uint64, err error) {
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
	if seen.holdsNot(kvs[0]) {
		return "", recorded, id, nil
	}
	op, err := s.OpAt(ctx, string(kvs[0].Value), resp.Header.Revision)
	if err != nil {
		return "", recorded, id, err
	}
	if t := op.Spec.Type; t == api.OpRestore || t == api.OpRecover {
		if op.Status.Phase == api.OpRunning {
			return fmt.Sprintf("%s %s holds the cluster (step %s)", t, op.Metadata.Name, op.Status.Step), recorded, id, nil
		}
		return "", recorded, id, nil
	}
	seen.remember(kvs[0])
	return "", recorded, id, nil
}

// HoldSeen remembers the operation in flight last found to be of a type
// that never holds the cluster (neither a restore nor a recovery), by the
// name and revision of ActiveOpKey: an operation's type is set when it
// starts, and every start writes ActiveOpKey, so while the key is
// unchanged the operation is still not one that holds. Hold then skips
// its read of the operation. The zero value is ready; it is safe for
// concurrent use.
type HoldSeen struct {
	mu   sync.Mutex
	name string
	rev  int64
}

// holdsNot tells whether active (ActiveOpKey as read) is the key of the
// operation last remembered; false on a nil HoldSeen.
func (h *HoldSeen) holdsNot(active *mvccpb.KeyValue) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev == active.ModRevision && h.name == string(active.Value)
}

// remember records active as the key of an operation that does not hold.
func (h *HoldSeen) remember(active *mvccpb.KeyValue) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.name, h.rev = string(active.Value), active.ModRevision
}

// FormatClusterID is how ClusterIDKey holds a cluster ID.
func FormatClusterID(id uint64) string { return fmt.Sprintf("%016x", id) }

// RecordClusterIDOp records id as the cluster the coordinators act on.
func RecordClusterIDOp(id uint64) clientv3.Op {
	return clientv3.OpPut(ClusterIDKey, FormatClusterID(id))
}

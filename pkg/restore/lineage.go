package restore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// addEarlier appends id to lineage unless it is zero or already there.
func addEarlier(lineage []api.EarlierCluster, id api.MemberID, at time.Time, by string) []api.EarlierCluster {
	if id == 0 || slices.ContainsFunc(lineage, func(e api.EarlierCluster) bool { return e.ClusterID == id }) {
		return lineage
	}
	return append(lineage, api.EarlierCluster{ClusterID: id, ReplacedAt: at, By: by})
}

// lineageOf is the lineage a restore gives the new cluster: what the
// snapshot's own lineage lists, the clusters its Node records name, the
// snapshot's cluster (when its store's metadata names it) and, when the
// old cluster answered, its ID and its lineage.
func lineageOf(info Info, snapCluster api.MemberID, live liveLineage, at time.Time, by string) []api.EarlierCluster {
	out := slices.Clone(info.Lineage)
	for _, id := range info.Clusters {
		out = addEarlier(out, id, at, by)
	}
	out = addEarlier(out, snapCluster, at, by)
	for _, e := range live.earlier {
		out = addEarlier(out, e.ClusterID, e.ReplacedAt, e.By)
	}
	return addEarlier(out, live.id, at, by)
}

// liveLineage is the live (old) cluster's ID and its recorded lineage.
type liveLineage struct {
	id      api.MemberID
	earlier []api.EarlierCluster
}

// accepts tells whether a snapshot of cluster id is of this fleet: the
// live cluster or one it descends from.
func (l liveLineage) accepts(id api.MemberID) bool {
	return id == l.id || slices.ContainsFunc(l.earlier, func(e api.EarlierCluster) bool { return e.ClusterID == id })
}

// readLineage reads the lineage stored under prefix (none: empty).
func readLineage(ctx context.Context, cli *clientv3.Client, prefix string) ([]api.EarlierCluster, error) {
	kv, _, err := store.GetUnder(ctx, cli, prefix, store.ClusterLineageKey)
	if err != nil {
		return nil, fmt.Errorf("restore: read the live cluster's lineage: %w", err)
	}
	if kv == nil {
		return nil, nil
	}
	var l api.ClusterLineage
	if err := json.Unmarshal(kv.Value, &l); err != nil {
		return nil, fmt.Errorf("restore: decode the live cluster's lineage: %w", err)
	}
	return l.Status.Earlier, nil
}

// lineageOp writes j's lineage into the new cluster, without the new
// cluster itself.
func lineageOp(j *Journal) (clientv3.Op, error) {
	earlier := slices.DeleteFunc(slices.Clone(j.Lineage), func(e api.EarlierCluster) bool {
		return uint64(e.ClusterID) == j.NewClusterID
	})
	return store.PutObjectOp(api.NewClusterLineage(earlier))
}

func lineageIDs(l []api.EarlierCluster) []api.MemberID {
	return (&api.ClusterLineage{Status: api.ClusterLineageStatus{Earlier: l}}).IDs()
}

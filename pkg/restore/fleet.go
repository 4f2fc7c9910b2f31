package restore

import (
	"context"

	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fleet is what a Runner acts on: the control-plane members, by node name.
// Every method is idempotent, so that a resumed Runner may call it again.
type Fleet interface {
	// Stop stops node's member and, when fence is not nil, fences its
	// data dir (member.WriteFence) so that nothing serves it again.
	Stop(ctx context.Context, node string, fence *member.Fence) error
	// Restore replaces node's data dir (the old one is kept as a wiped
	// copy) with the snapshot restored as a new one-member cluster.
	Restore(ctx context.Context, node string, snapshot string, bump uint64) error
	// Serve starts node's member from its data dir (forced into a new
	// one-member cluster when force) unless it serves already, and
	// returns its cluster ID.
	Serve(ctx context.Context, node string, force bool) (clusterID uint64, err error)
	// Rejoin wipes node's data dir and joins it to the cluster that
	// serves (the new one) as a learner, then promotes it; a node already a
	// voter of that cluster is only served.
	Rejoin(ctx context.Context, node string) error
	// Client is a client of the new cluster's members that serve.
	Client(ctx context.Context) (*clientv3.Client, error)
}

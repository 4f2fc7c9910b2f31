package restore

import (
	"context"
	"errors"
	"fmt"

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
	// Serve starts node's member from its data dir unless it serves
	// already, and returns its cluster ID. With a hold (a recovery's
	// survivor), the member is forced into a new one-member cluster and
	// serves first on a private loopback client URL only, where the hold
	// is written; only then does it serve on its own URLs.
	Serve(ctx context.Context, node string, hold *FirstHold) (clusterID uint64, err error)
	// Rejoin wipes node's data dir and joins it to the cluster that
	// serves (the new one) as a learner, then promotes it; a node already a
	// voter of that cluster is only served.
	Rejoin(ctx context.Context, node string) error
	// Client is a client of the new cluster's members that serve.
	Client(ctx context.Context) (*clientv3.Client, error)
}

// FirstHold is what a recovery writes into its survivor's cluster before
// the survivor serves where anyone else may reach it: its Journal as the
// operation in flight (the hold, store.Hold). A recovery keeps the
// survivor's cluster ID, so nothing else holds the coordinators off it: a
// coordinator whose session survived (etcd refreshes every lease when a
// leader is elected) would plan on the one-member cluster.
type FirstHold struct {
	// Prefix is nico's keyspace prefix in etcd.
	Prefix  string   `json:"prefix"`
	Journal *Journal `json:"journal"`
}

// Check refuses a hold that names no journal, or another operation than
// op ("": any).
func (h *FirstHold) Check(op string) error {
	switch {
	case h.Journal == nil:
		return fmt.Errorf("%w: field hold.journal is empty, want the recovery's journal", ErrBadHold)
	case op != "" && h.Journal.ID != op:
		return fmt.Errorf("%w: field hold.journal.id %q is not the operation %q", ErrBadHold, h.Journal.ID, op)
	case h.Prefix == "":
		return fmt.Errorf("%w: field hold.prefix is empty, want nico's keyspace prefix (as /nico/v1/)", ErrBadHold)
	}
	return nil
}

// ErrBadHold refuses a FirstHold that cannot be written.
var ErrBadHold = errors.New("restore: bad hold")

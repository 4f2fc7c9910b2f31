package store

import (
	"context"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutOnLease writes obj bound to lease (0: to none): the key goes when the
// lease ends, so that what a process reports of itself does not outlive
// it. A lease etcd no longer has is etcd's error
// (rpctypes.ErrLeaseNotFound), and nothing is written.
func (s *Store) PutOnLease(ctx context.Context, obj api.Object, lease clientv3.LeaseID) error {
	if lease == 0 {
		return s.PutObject(ctx, obj)
	}
	return s.PutObject(ctx, obj, clientv3.WithLease(lease))
}

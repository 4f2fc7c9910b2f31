package store

import (
	"context"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutUnchanged writes obj only while fence holds and obj's key is still at
// the revision obj was read at (UnchangedGuard): a write in between fails
// it with ErrConflict naming the key, a lost fence with ErrNotLeader.
func (s *Store) PutUnchanged(ctx context.Context, f Fence, obj api.Object) (*clientv3.TxnResponse, error) {
	g, err := UnchangedGuard(obj)
	if err != nil {
		return nil, err
	}
	put, err := PutObjectOp(obj)
	if err != nil {
		return nil, err
	}
	return s.FencedTxn(ctx, f, []Guard{g}, put)
}

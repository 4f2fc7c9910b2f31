package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fence identifies one term of leadership: the election key and the
// revision at which it was created. A fenced write commits only while that
// exact key still exists, so a deposed leader cannot write.
type Fence struct {
	Key string
	Rev int64
}

// Cmp is the transaction comparison that holds while the fence does.
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)
}

// Guard is an extra condition of a fenced transaction, with the error to
// return when it does not hold.
type Guard struct {
	Cmp clientv3.Cmp
	Err error
}

// FencedTxn applies ops only while fence holds and every guard holds. It
// returns ErrNotLeader when the fence is gone, or the first failing guard's
// error.
func (s *Store) FencedTxn(ctx context.Context, f Fence, guards []Guard, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	cmps := []clientv3.Cmp{f.Cmp()}
	for _, g := range guards {
		cmps = append(cmps, g.Cmp)
	}
	// On failure, read back the fence key and each guarded key so the
	// failing condition can be named.
	var elseOps []clientv3.Op
	elseOps = append(elseOps, clientv3.OpGet(f.Key))
	for _, g := range guards {
		elseOps = append(elseOps, clientv3.OpTxn([]clientv3.Cmp{g.Cmp}, nil, nil))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(elseOps...).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: fenced txn: %w", err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	fence := resp.Responses[0].GetResponseRange()
	if fence == nil || len(fence.Kvs) == 0 || fence.Kvs[0].CreateRevision != f.Rev {
		return nil, fmt.Errorf("%w: leadership key %s@%d is gone", ErrNotLeader, f.Key, f.Rev)
	}
	for i, g := range guards {
		if sub := resp.Responses[1+i].GetResponseTxn(); sub != nil && !sub.Succeeded {
			return nil, g.Err
		}
	}
	return nil, fmt.Errorf("%w: fenced txn", ErrConflict)
}

// Leads confirms that fence holds, by a linearizable read; ErrNotLeader
// when it is gone. It guards a side effect no transaction can carry (a
// change to etcd's membership or leadership): a leader paused past its
// session's end (a stopped process, a long pause of the machine) learns
// here that its term is over before it acts on a step planned in it.
func (s *Store) Leads(ctx context.Context, f Fence) error {
	_, err := s.FencedTxn(ctx, f, nil)
	return err
}

package store

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TxnOrView is one transaction that applies then when every cmp holds,
// and reads ranges either way (after then's writes when it ran): a write
// that holds in the usual case, and in the same round trip the view the
// caller needs in both. ok tells whether then ran; the view's revision is
// the transaction's.
func (s *Store) TxnOrView(ctx context.Context, cmps []clientv3.Cmp, then []clientv3.Op, ranges ...Range) (v *View, ok bool, err error) {
	reads := make([]clientv3.Op, len(ranges))
	for i, r := range ranges {
		reads[i] = r.op(0)
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(append(slices.Clip(then), reads...)...).Else(reads...).Commit()
	if err != nil {
		return nil, false, fmt.Errorf("store: txn: %w", err)
	}
	first := 0
	if resp.Succeeded {
		first = len(then)
	}
	v = &View{Rev: resp.Header.Revision, kvs: make(map[Range][]*mvccpb.KeyValue, len(ranges))}
	for i, r := range ranges {
		v.kvs[r] = resp.Responses[first+i].GetResponseRange().GetKvs()
	}
	return v, resp.Succeeded, nil
}

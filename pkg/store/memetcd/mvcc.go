package memetcd

import (
	"bytes"
	"cmp"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// at is key as of revision rev (0: the newest, writes of a transaction in
// progress included); nil when it did not exist then.
func (e *Etcd) at(key string, rev int64) *mvccpb.KeyValue {
	h := e.keys[key]
	for i := len(h) - 1; i >= 0; i-- {
		if rev == 0 || h[i].rev <= rev {
			return h[i].kv
		}
	}
	return nil
}

// keysIn lists, in order, the keys of [key, end) that have a history:
// end "" is key alone, end "\x00" every key from key on.
func (e *Etcd) keysIn(key, end []byte) []string {
	if len(end) == 0 {
		if _, ok := e.keys[string(key)]; ok {
			return []string{string(key)}
		}
		return nil
	}
	var out []string
	for k := range e.keys {
		if k >= string(key) && (string(end) == "\x00" || k < string(end)) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// live lists the keys of [key, end) as of rev (0: newest), in key order.
func (e *Etcd) live(key, end []byte, rev int64) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, k := range e.keysIn(key, end) {
		if kv := e.at(k, rev); kv != nil {
			out = append(out, kv)
		}
	}
	return out
}

// rangeLocked answers r as of the store whose revision is cur.
func (e *Etcd) rangeLocked(r *pb.RangeRequest, cur int64) (*pb.RangeResponse, error) {
	switch {
	case r.Revision > cur:
		return nil, rpctypes.ErrGRPCFutureRev
	case r.Revision > 0 && r.Revision < e.compacted:
		return nil, rpctypes.ErrGRPCCompacted
	}
	all := e.live(r.Key, r.RangeEnd, r.Revision)
	resp := &pb.RangeResponse{Header: e.header(cur), Count: int64(len(all))}
	if r.CountOnly {
		return resp, nil
	}
	var kvs []*mvccpb.KeyValue
	for _, kv := range all {
		if (r.MinModRevision > 0 && kv.ModRevision < r.MinModRevision) ||
			(r.MaxModRevision > 0 && kv.ModRevision > r.MaxModRevision) ||
			(r.MinCreateRevision > 0 && kv.CreateRevision < r.MinCreateRevision) ||
			(r.MaxCreateRevision > 0 && kv.CreateRevision > r.MaxCreateRevision) {
			continue
		}
		kvs = append(kvs, kv)
	}
	sortKVs(kvs, r.SortTarget, r.SortOrder)
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs, resp.More = kvs[:r.Limit], true
	}
	for _, kv := range kvs {
		c := clone(kv)
		if r.KeysOnly {
			c.Value = nil
		}
		resp.Kvs = append(resp.Kvs, c)
	}
	return resp, nil
}

// sortKVs orders kvs as etcd does: by key unless told otherwise, and
// ascending when a target but no order is given.
func sortKVs(kvs []*mvccpb.KeyValue, target pb.RangeRequest_SortTarget, order pb.RangeRequest_SortOrder) {
	if order == pb.RangeRequest_NONE {
		if target == pb.RangeRequest_KEY {
			return
		}
		order = pb.RangeRequest_ASCEND
	}
	by := func(a, b *mvccpb.KeyValue) int {
		switch target {
		case pb.RangeRequest_VERSION:
			return cmp.Compare(a.Version, b.Version)
		case pb.RangeRequest_CREATE:
			return cmp.Compare(a.CreateRevision, b.CreateRevision)
		case pb.RangeRequest_MOD:
			return cmp.Compare(a.ModRevision, b.ModRevision)
		case pb.RangeRequest_VALUE:
			return bytes.Compare(a.Value, b.Value)
		}
		return bytes.Compare(a.Key, b.Key)
	}
	slices.SortStableFunc(kvs, func(a, b *mvccpb.KeyValue) int {
		if order == pb.RangeRequest_DESCEND {
			return by(b, a)
		}
		return by(a, b)
	})
}

// holds tells whether comparison c holds now (writes of a transaction in
// progress included). Over a range every key must satisfy it; an absent
// key compares as zero, except that its value compares false.
func (e *Etcd) holds(c *pb.Compare) bool {
	kvs := e.live(c.Key, c.RangeEnd, 0)
	if len(kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		return compareKV(c, &mvccpb.KeyValue{})
	}
	for _, kv := range kvs {
		if !compareKV(c, kv) {
			return false
		}
	}
	return true
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var r int
	switch c.Target {
	case pb.Compare_VALUE:
		r = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		r = cmp.Compare(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		r = cmp.Compare(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		r = cmp.Compare(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		r = cmp.Compare(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return r == 0
	case pb.Compare_NOT_EQUAL:
		return r != 0
	case pb.Compare_GREATER:
		return r > 0
	case pb.Compare_LESS:
		return r < 0
	}
	return false
}

// compactLocked drops the history before rev: reads and watches from an
// earlier revision fail with ErrCompacted from then on.
func (e *Etcd) compactLocked(rev int64) error {
	switch {
	case rev <= e.compacted:
		return rpctypes.ErrGRPCCompacted
	case rev > e.rev:
		return rpctypes.ErrGRPCFutureRev
	}
	e.compacted = rev
	for k, h := range e.keys {
		i := 0
		for i+1 < len(h) && h[i+1].rev <= rev {
			i++
		}
		// h[i] is what k was at rev: keep it unless it was a deletion.
		if h[i].rev <= rev && h[i].kv == nil {
			i++
		}
		if i == len(h) {
			delete(e.keys, k)
			continue
		}
		e.keys[k] = slices.Clone(h[i:])
	}
	e.events = slices.DeleteFunc(e.events, func(ev *mvccpb.Event) bool { return ev.Kv.ModRevision < rev })
	return nil
}

func clone(kv *mvccpb.KeyValue) *mvccpb.KeyValue {
	if kv == nil {
		return nil
	}
	return proto.Clone(kv).(*mvccpb.KeyValue)
}

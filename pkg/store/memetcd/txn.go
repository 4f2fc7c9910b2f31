package memetcd

import (
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A tx is one write: its changes take revision e.rev+1, and the reads
// after them in the same transaction see them. commit publishes them.
type tx struct {
	e      *Etcd
	events []*mvccpb.Event
}

func (t *tx) rev() int64 { return t.e.rev + 1 }

// commit makes t's changes the store's new revision and tells the
// watches; a transaction that changed nothing leaves the revision as is.
func (t *tx) commit() {
	if len(t.events) == 0 {
		return
	}
	e := t.e
	e.rev++
	e.events = append(e.events, t.events...)
	for s := range e.streams {
		s.notify(e.rev, t.events)
	}
}

// check fails ops before any applies: a put to a lease that does not
// exist, or one that keeps the value or lease of an absent key.
func (t *tx) check(ops []*pb.RequestOp) error {
	for _, op := range ops {
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			p := r.RequestPut
			if p.Lease != 0 && !p.IgnoreLease && t.e.leases[p.Lease] == nil {
				return rpctypes.ErrGRPCLeaseNotFound
			}
			if (p.IgnoreValue || p.IgnoreLease) && t.e.at(string(p.Key), 0) == nil {
				return rpctypes.ErrGRPCKeyNotFound
			}
		case *pb.RequestOp_RequestTxn:
			if err := t.check(r.RequestTxn.Success); err != nil {
				return err
			}
			if err := t.check(r.RequestTxn.Failure); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tx) put(p *pb.PutRequest) *pb.PutResponse {
	e, key, rev := t.e, string(p.Key), t.rev()
	prev := e.at(key, 0)
	kv := &mvccpb.KeyValue{Key: slices.Clone(p.Key), Value: slices.Clone(p.Value), Lease: p.Lease,
		CreateRevision: rev, ModRevision: rev, Version: 1}
	if prev != nil {
		kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
		if p.IgnoreValue {
			kv.Value = prev.Value
		}
		if p.IgnoreLease {
			kv.Lease = prev.Lease
		}
		e.detach(prev)
	}
	e.attach(kv)
	e.keys[key] = append(e.keys[key], record{rev: rev, kv: kv})
	t.events = append(t.events, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv, PrevKv: prev})
	resp := &pb.PutResponse{Header: e.header(rev)}
	if p.PrevKv {
		resp.PrevKv = clone(prev)
	}
	return resp
}

func (t *tx) deleteRange(d *pb.DeleteRangeRequest) *pb.DeleteRangeResponse {
	resp := &pb.DeleteRangeResponse{}
	t.deleteKVs(t.e.live(d.Key, d.RangeEnd, 0), func(prev *mvccpb.KeyValue) {
		resp.Deleted++
		if d.PrevKv {
			resp.PrevKvs = append(resp.PrevKvs, clone(prev))
		}
	})
	resp.Header = t.e.header(t.e.rev)
	if resp.Deleted > 0 {
		resp.Header.Revision = t.rev()
	}
	return resp
}

// deleteKVs deletes kvs at t's revision, calling each with every one.
func (t *tx) deleteKVs(kvs []*mvccpb.KeyValue, each func(prev *mvccpb.KeyValue)) {
	e, rev := t.e, t.rev()
	for _, prev := range kvs {
		key := string(prev.Key)
		e.detach(prev)
		e.keys[key] = append(e.keys[key], record{rev: rev})
		t.events = append(t.events, &mvccpb.Event{Type: mvccpb.DELETE,
			Kv: &mvccpb.KeyValue{Key: prev.Key, ModRevision: rev}, PrevKv: prev})
		if each != nil {
			each(prev)
		}
	}
}

// txn applies r's branch that its comparisons choose.
func (t *tx) txn(r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if len(r.Compare) > maxTxnOps || len(r.Success) > maxTxnOps || len(r.Failure) > maxTxnOps {
		return nil, rpctypes.ErrGRPCTooManyOps
	}
	ok := true
	for _, c := range r.Compare {
		if !t.e.holds(c) {
			ok = false
			break
		}
	}
	ops := r.Failure
	if ok {
		ops = r.Success
	}
	if err := t.check(ops); err != nil {
		return nil, err
	}
	resp := &pb.TxnResponse{Succeeded: ok}
	for _, op := range ops {
		out, err := t.apply(op)
		if err != nil {
			return nil, err
		}
		resp.Responses = append(resp.Responses, out)
	}
	resp.Header = t.e.header(t.e.rev)
	if len(t.events) > 0 {
		resp.Header.Revision = t.rev()
	}
	return resp, nil
}

func (t *tx) apply(op *pb.RequestOp) (*pb.ResponseOp, error) {
	switch r := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		cur := t.e.rev
		if len(t.events) > 0 {
			cur = t.rev()
		}
		rr, err := t.e.rangeLocked(r.RequestRange, cur)
		if err != nil {
			return nil, err
		}
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}}, nil
	case *pb.RequestOp_RequestPut:
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: t.put(r.RequestPut)}}, nil
	case *pb.RequestOp_RequestDeleteRange:
		dr := t.deleteRange(r.RequestDeleteRange)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}}, nil
	case *pb.RequestOp_RequestTxn:
		tr, err := t.txn(r.RequestTxn)
		if err != nil {
			return nil, err
		}
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: tr}}, nil
	}
	return nil, rpctypes.ErrGRPCEmptyKey
}

// rollback undoes t's changes, newest first: a transaction that failed
// part way applies nothing.
func (t *tx) rollback() {
	e := t.e
	for i := len(t.events) - 1; i >= 0; i-- {
		ev := t.events[i]
		key := string(ev.Kv.Key)
		h := e.keys[key]
		if h = h[:len(h)-1]; len(h) == 0 {
			delete(e.keys, key)
		} else {
			e.keys[key] = h
		}
		if ev.Type == mvccpb.PUT {
			e.detach(ev.Kv)
		}
		if ev.PrevKv != nil {
			e.attach(ev.PrevKv)
		}
	}
	t.events = nil
}

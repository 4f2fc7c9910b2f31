package etcdnsproxy

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy"
)

// kvServer serves etcd's KV API through kv (namespaced), with no cache:
// etcd's grpcproxy KV proxy keeps serializable reads in a cache that only
// writes through the same proxy invalidate, and each server of a cluster
// runs its own proxy, so a read on one would not see another's writes.
type kvServer struct {
	pb.UnimplementedKVServer
	kv clientv3.KV
}

// Range implements pb.KVServer.
func (s *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, err := s.kv.Do(ctx, grpcproxy.RangeRequestToOp(r))
	if err != nil {
		return nil, err
	}
	return (*pb.RangeResponse)(resp.Get()), nil
}

// Put implements pb.KVServer.
func (s *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	resp, err := s.kv.Do(ctx, grpcproxy.PutRequestToOp(r))
	if err != nil {
		return nil, err
	}
	return (*pb.PutResponse)(resp.Put()), nil
}

// DeleteRange implements pb.KVServer.
func (s *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	resp, err := s.kv.Do(ctx, grpcproxy.DelRequestToOp(r))
	if err != nil {
		return nil, err
	}
	return (*pb.DeleteRangeResponse)(resp.Del()), nil
}

// Txn implements pb.KVServer.
func (s *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := s.kv.Do(ctx, grpcproxy.TxnRequestToOp(r))
	if err != nil {
		return nil, err
	}
	return (*pb.TxnResponse)(resp.Txn()), nil
}

// Compact implements pb.KVServer: passed on (etcd refuses it to a
// cluster's identity, which holds no root role).
func (s *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	var opts []clientv3.CompactOption
	if r.Physical {
		opts = append(opts, clientv3.WithCompactPhysical())
	}
	resp, err := s.kv.Compact(ctx, r.Revision, opts...)
	if err != nil {
		return nil, err
	}
	return (*pb.CompactionResponse)(resp), nil
}

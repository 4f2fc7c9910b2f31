package memetcd

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// kvClient serves etcd's KV API from e, as clientv3.NewKVFromKVClient
// calls it.
type kvClient struct{ e *Etcd }

var _ pb.KVClient = kvClient{}

func (c kvClient) Range(ctx context.Context, r *pb.RangeRequest, _ ...grpc.CallOption) (*pb.RangeResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	return e.rangeLocked(r, e.rev)
}

func (kvClient) RangeStream(context.Context, *pb.RangeRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.RangeStreamResponse], error) {
	return nil, status.Error(codes.Unimplemented, "memetcd: RangeStream")
}

func (c kvClient) Put(ctx context.Context, r *pb.PutRequest, _ ...grpc.CallOption) (*pb.PutResponse, error) {
	resp, err := c.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: r}}}})
	if err != nil {
		return nil, err
	}
	return resp.Responses[0].GetResponsePut(), nil
}

func (c kvClient) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest, _ ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	resp, err := c.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: r}}}})
	if err != nil {
		return nil, err
	}
	return resp.Responses[0].GetResponseDeleteRange(), nil
}

func (c kvClient) Txn(ctx context.Context, r *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	t := &tx{e: e}
	resp, err := t.txn(r)
	if err != nil {
		t.rollback()
		return nil, err
	}
	t.commit()
	return resp, nil
}

func (c kvClient) Compact(ctx context.Context, r *pb.CompactionRequest, _ ...grpc.CallOption) (*pb.CompactionResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if err := e.compactLocked(r.Revision); err != nil {
		return nil, err
	}
	return &pb.CompactionResponse{Header: e.header(e.rev)}, nil
}

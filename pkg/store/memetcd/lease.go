package memetcd

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// maxLeaseTTL is etcd's bound on a lease's TTL, in seconds.
const maxLeaseTTL = 9000000000

// A lease is granted for ttl seconds and ends at expiry (on e's clock)
// unless kept alive; its keys are deleted when it ends.
type lease struct {
	id     int64
	ttl    int64
	expiry time.Time
	keys   map[string]bool
}

func (e *Etcd) attach(kv *mvccpb.KeyValue) {
	if l := e.leases[kv.Lease]; l != nil {
		l.keys[string(kv.Key)] = true
	}
}

func (e *Etcd) detach(kv *mvccpb.KeyValue) {
	if l := e.leases[kv.Lease]; l != nil {
		delete(l.keys, string(kv.Key))
	}
}

// revokeLocked ends l: its keys are deleted in one revision.
func (e *Etcd) revokeLocked(l *lease) {
	var kvs []*mvccpb.KeyValue
	for k := range l.keys {
		if kv := e.at(k, 0); kv != nil {
			kvs = append(kvs, kv)
		}
	}
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return compareBytes(a.Key, b.Key) })
	t := &tx{e: e}
	t.deleteKVs(kvs, nil)
	delete(e.leases, l.id)
	t.commit()
}

// expireLocked ends every lease whose expiry has come, oldest first, and
// sets the timer to the next one.
func (e *Etcd) expireLocked() {
	now := e.clock.Now()
	var due []*lease
	for _, l := range e.leases {
		if !l.expiry.After(now) {
			due = append(due, l)
		}
	}
	slices.SortFunc(due, func(a, b *lease) int { return a.expiry.Compare(b.expiry) })
	for _, l := range due {
		e.revokeLocked(l)
	}
	e.scheduleLocked()
}

// scheduleLocked sets e's one timer to the earliest expiry, or stops it
// when no lease is granted.
func (e *Etcd) scheduleLocked() {
	var next time.Time
	for _, l := range e.leases {
		if next.IsZero() || l.expiry.Before(next) {
			next = l.expiry
		}
	}
	if next.IsZero() {
		if e.timer != nil {
			e.timer.Stop()
		}
		return
	}
	d := next.Sub(e.clock.Now())
	if e.timer == nil {
		e.timer = e.clock.AfterFunc(d, e.onTimer)
		return
	}
	e.timer.Reset(d)
}

func (e *Etcd) onTimer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.expireLocked()
	}
}

func (e *Etcd) renewLocked(l *lease) {
	l.expiry = e.clock.Now().Add(time.Duration(l.ttl) * time.Second)
	e.scheduleLocked()
}

// leaseClient serves etcd's Lease API from e, as
// clientv3.NewLeaseFromLeaseClient calls it.
type leaseClient struct{ e *Etcd }

var _ pb.LeaseClient = leaseClient{}

func (c leaseClient) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest, _ ...grpc.CallOption) (*pb.LeaseGrantResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	switch {
	case r.TTL > maxLeaseTTL:
		return nil, rpctypes.ErrGRPCLeaseTTLTooLarge
	case r.ID != 0 && e.leases[r.ID] != nil:
		return nil, rpctypes.ErrGRPCLeaseExist
	}
	id := r.ID
	if id == 0 {
		for e.nextID++; e.leases[e.nextID] != nil; e.nextID++ {
		}
		id = e.nextID
	}
	l := &lease{id: id, ttl: max(r.TTL, 1), keys: make(map[string]bool)}
	e.leases[id] = l
	e.renewLocked(l)
	return &pb.LeaseGrantResponse{Header: e.header(e.rev), ID: id, TTL: l.ttl}, nil
}

func (c leaseClient) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest, _ ...grpc.CallOption) (*pb.LeaseRevokeResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	l := e.leases[r.ID]
	if l == nil {
		return nil, rpctypes.ErrGRPCLeaseNotFound
	}
	e.revokeLocked(l)
	e.scheduleLocked()
	return &pb.LeaseRevokeResponse{Header: e.header(e.rev)}, nil
}

func (c leaseClient) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest, _ ...grpc.CallOption) (*pb.LeaseTimeToLiveResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	l := e.leases[r.ID]
	if l == nil {
		return &pb.LeaseTimeToLiveResponse{Header: e.header(e.rev), ID: r.ID, TTL: -1}, nil
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: e.header(e.rev), ID: l.id, GrantedTTL: l.ttl,
		TTL: int64(math.Ceil(l.expiry.Sub(e.clock.Now()).Seconds()))}
	if r.Keys {
		for k := range l.keys {
			resp.Keys = append(resp.Keys, []byte(k))
		}
		slices.SortFunc(resp.Keys, compareBytes)
	}
	return resp, nil
}

func (c leaseClient) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest, _ ...grpc.CallOption) (*pb.LeaseLeasesResponse, error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	resp := &pb.LeaseLeasesResponse{Header: e.header(e.rev)}
	for id := range e.leases {
		resp.Leases = append(resp.Leases, &pb.LeaseStatus{ID: id})
	}
	slices.SortFunc(resp.Leases, func(a, b *pb.LeaseStatus) int { return cmp.Compare(a.ID, b.ID) })
	return resp, nil
}

func (c leaseClient) LeaseKeepAlive(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse], error) {
	if err := c.e.begin(ctx); err != nil {
		return nil, err
	}
	c.e.mu.Unlock()
	return &keepAliveStream{stream: newStream[pb.LeaseKeepAliveResponse](ctx, c.e), e: c.e}, nil
}

// keepAliveStream renews a lease on each request and answers with its
// TTL, or 0 when the lease is gone.
type keepAliveStream struct {
	*stream[pb.LeaseKeepAliveResponse]
	e *Etcd
}

func (s *keepAliveStream) Send(r *pb.LeaseKeepAliveRequest) error {
	e := s.e
	if err := e.begin(s.ctx); err != nil {
		return err
	}
	defer e.mu.Unlock()
	resp := &pb.LeaseKeepAliveResponse{Header: e.header(e.rev), ID: r.ID}
	if l := e.leases[r.ID]; l != nil {
		e.renewLocked(l)
		resp.TTL = l.ttl
	}
	s.push(resp)
	return nil
}

package memetcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease returns l failing as fs says (Kind Lease).
func (fs *Faults) Lease(l clientv3.Lease) clientv3.Lease { return &faultyLease{Lease: l, fs: fs} }

type faultyLease struct {
	clientv3.Lease
	fs *Faults
}

func (l *faultyLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	if err := l.fs.check(Lease, nil); err != nil {
		return nil, err
	}
	return l.Lease.Grant(ctx, ttl)
}

func (l *faultyLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	if err := l.fs.check(Lease, nil); err != nil {
		return nil, err
	}
	return l.Lease.Revoke(ctx, id)
}

func (l *faultyLease) TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	if err := l.fs.check(Lease, nil); err != nil {
		return nil, err
	}
	return l.Lease.TimeToLive(ctx, id, opts...)
}

func (l *faultyLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	if err := l.fs.check(Lease, nil); err != nil {
		return nil, err
	}
	return l.Lease.KeepAliveOnce(ctx, id)
}

// KeepAlive's failure is a channel closed at once, as etcd's client
// closes it when the lease is gone.
func (l *faultyLease) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	if err := l.fs.check(Lease, nil); err != nil {
		ch := make(chan *clientv3.LeaseKeepAliveResponse)
		close(ch)
		return ch, nil
	}
	return l.Lease.KeepAlive(ctx, id)
}

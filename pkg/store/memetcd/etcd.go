package memetcd

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClusterID and MemberID are what every response's header names.
const (
	ClusterID = 0x6e69636f
	MemberID  = 0x6d656d
)

// maxTxnOps is etcd's default bound on the operations of one transaction
// branch (--max-txn-ops).
const maxTxnOps = 128

// Etcd is one in-memory etcd. Its zero value is not usable: call New.
type Etcd struct {
	clock clockwork.Clock

	mu        sync.Mutex
	closed    bool
	done      chan struct{}
	rev       int64
	compacted int64
	// keys holds each key's history, oldest first: every write and
	// deletion that compaction has not dropped.
	keys map[string][]record
	// events is the history watches replay from, oldest first.
	events  []*mvccpb.Event
	streams map[*watchStream]bool
	leases  map[int64]*lease
	nextID  int64
	timer   clockwork.Timer
}

// record is one write of a key: kv, or its deletion at rev.
type record struct {
	rev int64
	kv  *mvccpb.KeyValue // nil: deleted at rev
}

// New returns an empty Etcd at revision 1 (etcd's first revision) whose
// leases expire by clock. It starts no goroutine: while a lease is
// granted it holds one timer on clock (a waiter for
// clockwork.FakeClock.BlockUntilContext), whose callback expires leases.
func New(clock clockwork.Clock) *Etcd {
	return &Etcd{
		clock:   clock,
		done:    make(chan struct{}),
		rev:     1,
		keys:    make(map[string][]record),
		streams: make(map[*watchStream]bool),
		leases:  make(map[int64]*lease),
		nextID:  0x7000000000000000,
	}
}

// Client returns a client of e: its KV, Watcher and Lease are e's, its
// Cluster and Maintenance are nil. Close it before e.
func (e *Etcd) Client() *clientv3.Client {
	cli := clientv3.NewCtxClient(context.Background())
	cli.KV = clientv3.NewKVFromKVClient(kvClient{e}, cli)
	cli.Watcher = clientv3.NewWatchFromWatchClient(watchClient{e}, cli)
	cli.Lease = clientv3.NewLeaseFromLeaseClient(leaseClient{e}, cli, time.Second)
	return cli
}

// Close stops e: its timer stops, open watch and keep-alive streams end
// with codes.Unavailable and every later request fails so.
func (e *Etcd) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	if e.timer != nil {
		e.timer.Stop()
	}
	close(e.done)
}

// Revision is e's current revision.
func (e *Etcd) Revision() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rev
}

var errClosed = status.Error(codes.Unavailable, "memetcd: closed")

// begin locks e for one request: it fails when ctx is done or e is
// closed, and expires the leases whose time has come first.
func (e *Etcd) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	e.expireLocked()
	return nil
}

func (e *Etcd) header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: ClusterID, MemberId: MemberID, Revision: rev, RaftTerm: 2}
}

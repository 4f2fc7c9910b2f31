package member

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// drainWait bounds how long a stopping member waits for client calls in
// flight before it tears its backend down anyway.
const drainWait = 5 * time.Second

// clientGate stands in front of every client call an embedded member
// serves (it is the outermost gRPC interceptor). etcd tears a member down
// while its gRPC server still takes calls: a removed member drops itself
// from its own membership (where Status's IsLearner panics, "failed to
// find local ID in cluster members"), then stops and closes its backend
// (where Status's StorageVersion dereferences a nil bbolt transaction). The
// gate refuses calls once the member is out of its own membership or
// stopping, and holds etcd's teardown (through EtcdServer.GoAttach, which
// etcd waits for before it closes the backend) until the calls already in
// flight have returned. A panic that still gets through is recovered,
// refused with Unavailable and closes the gate; the member then stops.
//
//	open --member not in its membership, stopping, or a recovered panic--> closed
//	closed: every call refused with Unavailable; etcd's teardown waits for
//	        the calls in flight (up to drainWait)
type clientGate struct {
	log *slog.Logger

	srv     atomic.Pointer[etcdserver.EtcdServer] // nil until StartEtcd returns
	removed atomic.Bool                           // closed because the member left its membership

	// ctx ends with the gate, and with it the context of every call in
	// flight: a proposal waits for etcd's teardown to end otherwise.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	isClosed bool
	inflight int
	idle     chan struct{} // closed when closed and no call is in flight
}

func newClientGate(log *slog.Logger) *clientGate {
	ctx, cancel := context.WithCancel(context.Background())
	return &clientGate{log: log, ctx: ctx, cancel: cancel, idle: make(chan struct{})}
}

// ServerGuard is the gRPC server options that put a client gate in front
// of an embedded etcd server started outside a Runtime (the test clusters
// of pkg/etcdtest): a call that panics in etcd while its member leaves its
// membership or stops (clientGate) is refused with Unavailable rather
// than crashing the process, and the gate then refuses every call. log
// takes the gate's records.
func ServerGuard(log *slog.Logger) []grpc.ServerOption {
	return newClientGate(log).serverOptions()
}

// serverOptions are the gRPC options that put the gate in front of etcd's
// own interceptors.
func (g *clientGate) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.UnaryInterceptor(g.unary), grpc.StreamInterceptor(g.stream)}
}

// attach ties the gate to the started server: etcd's teardown waits for
// the gate to close and drain.
func (g *clientGate) attach(s *etcdserver.EtcdServer) {
	g.srv.Store(s)
	s.GoAttach(func() {
		<-s.StoppingNotify()
		g.close("etcd server stopping")
		g.drain()
	})
	// GoAttach skips f when the server is stopping already.
	select {
	case <-s.StoppingNotify():
		g.close("etcd server stopping")
	default:
	}
}

// closed is closed once the gate refuses calls.
func (g *clientGate) closed() <-chan struct{} { return g.ctx.Done() }

// close makes the gate refuse every further call.
func (g *clientGate) close(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isClosed {
		return
	}
	g.isClosed = true
	g.cancel()
	if g.inflight == 0 {
		close(g.idle)
	}
	g.log.Debug("member refuses client calls", "why", why)
}

// drain waits until no call is in flight, up to drainWait.
func (g *clientGate) drain() {
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-g.idle:
	case <-t.C:
		g.log.Warn("client calls still in flight after the member stopped taking calls; closing it anyway", "waited", drainWait)
	}
}

// enter admits one call, or reports that the gate is closed.
func (g *clientGate) enter() bool {
	if s := g.srv.Load(); s != nil && !s.IsMemberExist(s.MemberID()) {
		g.removed.Store(true)
		g.close("member is no longer in its own membership")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isClosed {
		return false
	}
	g.inflight++
	return true
}

// leave ends a call that enter admitted.
func (g *clientGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.isClosed && g.inflight == 0 {
		close(g.idle)
	}
}

var errRefused = status.Error(codes.Unavailable, "member: not serving: removed from the cluster or stopping")

// recovered turns a panic of a call into an Unavailable error and closes
// the gate. It must be deferred directly.
func (g *clientGate) recovered(method string, err *error) {
	p := recover()
	if p == nil {
		return
	}
	g.log.Warn("client call panicked in the etcd member; refusing further calls", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	g.close("a client call panicked")
	*err = status.Errorf(codes.Unavailable, "member: not serving: %s failed while the member stops", method)
}

func (g *clientGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if !g.enter() {
		return nil, errRefused
	}
	defer g.leave()
	ctx, cancel := g.callContext(ctx)
	defer cancel()
	defer g.recovered(info.FullMethod, &err)
	return handler(ctx, req)
}

// callContext is ctx, ended also when the gate closes.
func (g *clientGate) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (g *clientGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	if !g.enter() {
		return errRefused
	}
	g.leave()
	ctx, cancel := g.callContext(ss.Context())
	defer cancel()
	gs := &gatedStream{ServerStream: ss, ctx: ctx, g: g}
	defer gs.release()
	defer g.recovered(info.FullMethod, &err)
	return handler(srv, gs)
}

// gatedStream counts a stream as in flight from the moment it receives a
// message until it asks for the next one (or ends), which is when etcd's
// stream handlers work on the server's state; it refuses messages once the
// gate is closed, which ends those handlers' receive loops.
type gatedStream struct {
	grpc.ServerStream
	ctx  context.Context // ends with the stream or the gate
	g    *clientGate
	mu   sync.Mutex
	held bool
}

func (s *gatedStream) Context() context.Context { return s.ctx }

func (s *gatedStream) RecvMsg(m any) error {
	s.release()
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.g.enter() {
		return errRefused
	}
	s.held = true
	return nil
}

func (s *gatedStream) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		s.held = false
		s.g.leave()
	}
}

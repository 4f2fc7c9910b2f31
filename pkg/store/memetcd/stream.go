package memetcd

import (
	"bytes"
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A stream is the receiving half of an in-memory gRPC stream: responses
// queue without bound until Recv takes them, so e never waits on a
// client while it holds its lock.
type stream[Resp any] struct {
	ctx   context.Context
	e     *Etcd
	mu    sync.Mutex
	queue []*Resp
	wake  chan struct{}
}

func newStream[Resp any](ctx context.Context, e *Etcd) *stream[Resp] {
	return &stream[Resp]{ctx: ctx, e: e, wake: make(chan struct{}, 1)}
}

func (s *stream[Resp]) push(r *Resp) {
	s.mu.Lock()
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Recv returns the next response; it fails when the stream's context
// ends or e closes.
func (s *stream[Resp]) Recv() (*Resp, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			r := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return r, nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return nil, status.FromContextError(s.ctx.Err()).Err()
		case <-s.e.done:
			return nil, errClosed
		}
	}
}

func (s *stream[Resp]) Header() (metadata.MD, error) { return nil, nil }
func (s *stream[Resp]) Trailer() metadata.MD         { return nil }
func (s *stream[Resp]) CloseSend() error             { return nil }
func (s *stream[Resp]) Context() context.Context     { return s.ctx }
func (s *stream[Resp]) SendMsg(any) error            { return errUnused }
func (s *stream[Resp]) RecvMsg(any) error            { return errUnused }

var errUnused = status.Error(codes.Unimplemented, "memetcd: SendMsg and RecvMsg are not served: use Send and Recv")

func compareBytes(a, b []byte) int { return bytes.Compare(a, b) }

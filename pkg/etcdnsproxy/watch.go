package etcdnsproxy

import (
	"bytes"
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// watchServer passes each client watch stream through to one etcd watch
// stream, keys moved into the namespace on the way in and out of it on
// the way back. Unlike etcd's grpcproxy watch proxy (which coalesces
// watchers and drops progress requests), every request reaches etcd as
// the client sent it: kube-apiserver's watch-progress requests, on which
// its consistent reads from the watch cache wait, are answered by etcd.
type watchServer struct {
	pb.UnimplementedWatchServer
	ns     []byte
	client pb.WatchClient
}

// Watch implements pb.WatchServer.
func (w *watchServer) Watch(stream pb.Watch_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	// The client's metadata (etcd's "hasleader" requirement) goes on.
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	up, err := w.client.Watch(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if cr := req.GetCreateRequest(); cr != nil {
				cr.Key, cr.RangeEnd = w.inside(cr.Key, cr.RangeEnd)
			}
			if err := up.Send(req); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			for _, ev := range resp.Events {
				if ev.Kv != nil {
					ev.Kv.Key = bytes.TrimPrefix(ev.Kv.Key, w.ns)
				}
				if ev.PrevKv != nil {
					ev.PrevKv.Key = bytes.TrimPrefix(ev.PrevKv.Key, w.ns)
				}
			}
			if err := stream.Send(resp); err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	cancel()
	<-errc
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// inside moves the range [key, end) into the namespace: etcd's "\x00"
// end (to the end of the keyspace) becomes the namespace's end.
func (w *watchServer) inside(key, end []byte) ([]byte, []byte) {
	k := append(append([]byte{}, w.ns...), key...)
	switch {
	case len(end) == 0:
		return k, nil
	case len(end) == 1 && end[0] == 0:
		return k, []byte(clientv3.GetPrefixRangeEnd(string(w.ns)))
	default:
		return k, append(append([]byte{}, w.ns...), end...)
	}
}

package memetcd

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
)

// watchClient serves etcd's Watch API from e, as
// clientv3.NewWatchFromWatchClient calls it.
type watchClient struct{ e *Etcd }

var _ pb.WatchClient = watchClient{}

func (c watchClient) Watch(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[pb.WatchRequest, pb.WatchResponse], error) {
	e := c.e
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	s := &watchStream{stream: newStream[pb.WatchResponse](ctx, e), watches: make(map[int64]*watch)}
	e.streams[s] = true
	return s, nil
}

// A watchStream carries the watches of one client stream; e tells it of
// every revision (notify) while it is open.
type watchStream struct {
	*stream[pb.WatchResponse]
	// watches and next are guarded by e.mu.
	watches map[int64]*watch
	next    int64
}

// A watch reports the events of [key, end) from revision from on.
type watch struct {
	id                      int64
	key, end                []byte
	from                    int64
	prevKV, noPut, noDelete bool
}

func (w *watch) match(ev *mvccpb.Event) bool {
	if ev.Kv.ModRevision < w.from {
		return false
	}
	if (ev.Type == mvccpb.PUT && w.noPut) || (ev.Type == mvccpb.DELETE && w.noDelete) {
		return false
	}
	k := string(ev.Kv.Key)
	if len(w.end) == 0 {
		return k == string(w.key)
	}
	return k >= string(w.key) && (string(w.end) == "\x00" || k < string(w.end))
}

// events returns the events of evs w reports, as it reports them.
func (w *watch) events(evs []*mvccpb.Event) []*mvccpb.Event {
	var out []*mvccpb.Event
	for _, ev := range evs {
		if !w.match(ev) {
			continue
		}
		c := &mvccpb.Event{Type: ev.Type, Kv: clone(ev.Kv)}
		if w.prevKV {
			c.PrevKv = clone(ev.PrevKv)
		}
		out = append(out, c)
	}
	return out
}

// Send creates or cancels a watch, or asks for a progress report.
func (s *watchStream) Send(r *pb.WatchRequest) error {
	e := s.e
	if err := e.begin(s.ctx); err != nil {
		return err
	}
	defer e.mu.Unlock()
	switch req := r.RequestUnion.(type) {
	case *pb.WatchRequest_CreateRequest:
		s.create(req.CreateRequest)
	case *pb.WatchRequest_CancelRequest:
		id := req.CancelRequest.WatchId
		if _, ok := s.watches[id]; ok {
			delete(s.watches, id)
			s.push(&pb.WatchResponse{Header: e.header(e.rev), WatchId: id, Canceled: true})
		}
	case *pb.WatchRequest_ProgressRequest:
		s.push(&pb.WatchResponse{Header: e.header(e.rev), WatchId: -1})
	}
	return nil
}

// create starts a watch: it answers created, then replays the events
// since its start revision, or ends it as compacted when they are gone.
func (s *watchStream) create(c *pb.WatchCreateRequest) {
	e := s.e
	w := &watch{id: s.next, key: c.Key, end: c.RangeEnd, from: c.StartRevision, prevKV: c.PrevKv}
	if c.WatchId != 0 {
		w.id = c.WatchId
	}
	s.next = max(s.next, w.id) + 1
	for _, f := range c.Filters {
		w.noPut = w.noPut || f == pb.WatchCreateRequest_NOPUT
		w.noDelete = w.noDelete || f == pb.WatchCreateRequest_NODELETE
	}
	if w.from == 0 {
		w.from = e.rev + 1
	}
	s.push(&pb.WatchResponse{Header: e.header(e.rev), WatchId: w.id, Created: true})
	if w.from < e.compacted {
		s.push(&pb.WatchResponse{Header: e.header(e.rev), WatchId: w.id, CompactRevision: e.compacted, Canceled: true})
		return
	}
	s.watches[w.id] = w
	// Replay one response per revision, as they were written.
	for i := 0; i < len(e.events); {
		rev := e.events[i].Kv.ModRevision
		j := i
		for j < len(e.events) && e.events[j].Kv.ModRevision == rev {
			j++
		}
		if evs := w.events(e.events[i:j]); len(evs) > 0 {
			s.push(&pb.WatchResponse{Header: e.header(rev), WatchId: w.id, Events: evs})
		}
		i = j
	}
}

// notify tells s's watches of the events of revision rev. A stream whose
// context ended is dropped.
func (s *watchStream) notify(rev int64, evs []*mvccpb.Event) {
	if s.ctx.Err() != nil {
		delete(s.e.streams, s)
		return
	}
	for _, w := range s.watches {
		if out := w.events(evs); len(out) > 0 {
			s.push(&pb.WatchResponse{Header: s.e.header(rev), WatchId: w.id, Events: out})
		}
	}
}

package events

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Feed reads the events the store holds and follows new ones with one etcd
// watch of Range from the revision it read at, so that nothing is missed
// between the two and nothing is told twice. It keeps the last value of
// every source key, to tell what a change added even when the watch's
// revision was compacted away. A Feed is used by one goroutine.
type Feed struct {
	st  *store.Store
	now func() time.Time
	// values are the source keys' values at rev.
	values map[string][]byte
	rev    int64
}

// NewFeed returns a Feed over st; now times changes the objects do not.
func NewFeed(st *store.Store, now func() time.Time) *Feed {
	return &Feed{st: st, now: now, values: map[string][]byte{}}
}

// Revision is the store revision the feed has read up to.
func (f *Feed) Revision() int64 { return f.rev }

// read reads every source key at one revision: their values and mod
// revisions, and the revision read at.
func (f *Feed) read(ctx context.Context) (map[string][]byte, map[string]int64, int64, error) {
	start, end := Range()
	kvs, rev, err := f.st.ReadSpan(ctx, start, end)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("events: %w", err)
	}
	vals, revs := map[string][]byte{}, map[string]int64{}
	for _, kv := range kvs {
		if k := string(kv.Key); Watched(k) {
			vals[k], revs[k] = kv.Value, kv.ModRevision
		}
	}
	return vals, revs, rev, nil
}

// Backlog reads the store and returns the events its objects still record,
// oldest first, and the problems of objects it could not read (each names
// its key; the others' events are still returned).
func (f *Feed) Backlog(ctx context.Context) ([]Event, []error, error) {
	vals, revs, rev, err := f.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	evs, bad := f.diff(vals, revs, rev)
	return evs, bad, nil
}

// diff derives the events from the feed's values to vals (with their mod
// revisions revs), read at rev, and takes vals as the feed's values. A
// deletion is timed at rev.
func (f *Feed) diff(vals map[string][]byte, revs map[string]int64, rev int64) ([]Event, []error) {
	var out []Event
	var bad []error
	at := f.now()
	// In key order, so that events of one time and revision (one
	// transaction) always come out alike.
	keys := slices.Sorted(maps.Keys(vals))
	for k := range f.values {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		v, ok := vals[k]
		if ok && string(f.values[k]) == string(v) {
			continue
		}
		c := Change{Key: k, Prev: f.values[k], Cur: v, Revision: revs[k], At: at}
		if !ok {
			c.Revision = rev // deleted: at or before rev
		}
		evs, err := Derive(c)
		if err != nil {
			bad = append(bad, err)
		}
		out = append(out, evs...)
	}
	f.values, f.rev = vals, rev
	Sort(out)
	return out, bad
}

// Handler receives what Follow finds. Every field must be set.
type Handler struct {
	// Event gets each event, in the order etcd committed their changes;
	// an error ends Follow with it.
	Event func(Event) error
	// Bad gets the problem of an object whose events could not be read.
	Bad func(error)
	// Notice gets what the user should know about the watch itself: a
	// compacted revision read again, a member without a leader.
	Notice func(string)
}

// Backoff bounds between watches of a member that has no leader.
const (
	minRetry = 200 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Follow watches from the revision after the last read and hands the
// events of every change to h until ctx ends (it then returns nil) or h
// fails. When etcd has compacted the revision it watches from, it reads
// the store again, hands over what changed since its last read (each
// object's changes in between as one, so the steps an operation journaled
// meanwhile are all there, a flapping liveness only as where it ended),
// tells h.Notice, and watches on from that read. When the member it
// watches has no leader (an election, a partition), it tells h.Notice and
// watches again from where it was, with backoff, until one is elected.
func (f *Feed) Follow(ctx context.Context, h Handler) error {
	retry := minRetry
	for {
		from := f.rev
		err := f.watch(ctx, h)
		if ctx.Err() != nil {
			return nil
		}
		if f.rev > from {
			retry = minRetry // it watched a while: a new trouble
		}
		if errors.Is(err, rpctypes.ErrNoLeader) {
			h.Notice(fmt.Sprintf("the etcd member has no leader; watching again from revision %d in %s", f.rev+1, retry))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
			retry = min(2*retry, maxRetry)
			continue
		}
		if !errors.Is(err, rpctypes.ErrCompacted) {
			return err
		}
		vals, revs, rev, rerr := f.read(ctx)
		if rerr != nil {
			return rerr
		}
		h.Notice(fmt.Sprintf("etcd compacted the history from revision %d on before it could be watched; read the store again at revision %d: changes in between are shown as one change per object", from+1, rev))
		evs, bad := f.diff(vals, revs, rev)
		for _, b := range bad {
			h.Bad(b)
		}
		for _, e := range evs {
			if err := h.Event(e); err != nil {
				return err
			}
		}
	}
}

// watch runs one watch from f.rev+1 until it fails or ctx ends.
func (f *Feed) watch(ctx context.Context, h Handler) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start, end := Range()
	wch := f.st.WatchSpan(clientv3.WithRequireLeader(wctx), start, end, f.rev+1)
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("events: watch from revision %d: %w", f.rev+1, err)
		}
		at := f.now()
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if !Watched(k) {
				continue
			}
			prev := f.values[k]
			if ev.PrevKv != nil {
				prev = ev.PrevKv.Value
			}
			c := Change{Key: k, Prev: prev, Revision: ev.Kv.ModRevision, At: at}
			if ev.Type == clientv3.EventTypePut {
				c.Cur = ev.Kv.Value
				f.values[k] = ev.Kv.Value
			} else {
				delete(f.values, k)
			}
			// Every change up to this one has been handed over: a later
			// re-read after compaction diffs from here.
			f.rev = ev.Kv.ModRevision
			evs, err := Derive(c)
			if err != nil {
				h.Bad(err)
			}
			for _, e := range evs {
				if err := h.Event(e); err != nil {
					return err
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("events: watch from revision %d closed", f.rev+1)
}

// Has tells whether key held a value at the feed's last read or change.
func (f *Feed) Has(key string) bool {
	_, ok := f.values[key]
	return ok
}

package agent

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Re-watch pacing after a watch channel closed (etcd refused or ended the
// watch, the client lost its leader or was closed).
const (
	rewatchInitial = 100 * time.Millisecond
	rewatchMax     = 10 * time.Second
)

// watchKey wakes its reader through C whenever range r (a key, or the keys
// under a directory) changes, until ctx ends or Stop.
// The reader re-reads what it watches on every wake (level-triggered), so
// wakes carry nothing and coalesce. A watch channel that closes is watched
// again from the revision after the last one seen, with backoff; when that
// revision was compacted away, the watch starts again from now and, once
// it is in place, the reader is woken to re-read everything.
//
//	watching --event--> wake, remember revision --> watching
//	   |  closed                         ^
//	   v                                 | created (after a compaction: wake)
//	backoff --> watch from last revision + 1 (compacted: from now)
func watchKey(ctx context.Context, w store.Watcher, r store.Range) *keyWatch {
	ctx, cancel := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	kw := &keyWatch{C: wake, w: w, r: r, wake: wake, cancel: cancel, done: make(chan struct{})}
	go kw.run(ctx)
	return kw
}

// keyWatch is one watchKey.
type keyWatch struct {
	// C receives a wake after each change; it is never closed.
	C <-chan struct{}

	w      store.Watcher
	r      store.Range
	wake   chan struct{}
	rev    int64 // last revision seen; 0: watch from now
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
}

// Stop ends the watch and waits for its goroutine; it is idempotent.
func (kw *keyWatch) Stop() {
	kw.cancel()
	<-kw.done
}

func (kw *keyWatch) notify() {
	select {
	case kw.wake <- struct{}{}:
	default:
	}
}

func (kw *keyWatch) run(ctx context.Context) {
	defer close(kw.done)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = rewatchInitial, rewatchMax
	resync := false // wake once the next watch is in place
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		from := int64(0)
		if kw.rev > 0 {
			from = kw.rev + 1
		}
		for resp := range store.WatchRangeCreated(clientv3.WithRequireLeader(wctx), kw.w, kw.r, from) {
			if resp.CompactRevision != 0 {
				kw.rev, resync = 0, true
				break
			}
			if resp.Err() != nil {
				break
			}
			if resp.Created {
				if kw.rev == 0 {
					kw.rev = resp.Header.Revision
				}
				if resync {
					resync = false
					kw.notify()
				}
				b.Reset()
				continue
			}
			if n := len(resp.Events); n > 0 {
				kw.rev = resp.Events[n-1].Kv.ModRevision
			} else {
				kw.rev = max(kw.rev, resp.Header.Revision) // a progress notification
			}
			kw.notify()
		}
		cancel()
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

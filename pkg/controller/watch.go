package controller

import (
	"context"
	"errors"
	"strings"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watch triggers a reconcile on every batch of events under prefix, from
// revision rev+1 on, until ctx ends. A closed watch is opened again from
// the revision after the last event it delivered, after a backoff; a
// compacted one triggers a full resync and is opened again at once from
// the current revision.
func (s *supervisor) watch(ctx context.Context, prefix string, rev int64) {
	next := rev + 1
	s.rec.watched(prefix, rev, 0)
	b := s.rt.newBackoff()
	for {
		var compacted bool
		next, compacted = s.watchFrom(ctx, prefix, next, b.Reset)
		if ctx.Err() != nil {
			return
		}
		if compacted {
			continue
		}
		d := b.NextBackOff()
		s.log.Debug("watch closed; watching again", "prefix", prefix, "from", next, "in", d)
		if !s.sleep(ctx, d) {
			return
		}
		s.rec.update(func(h *Health) { h.Rewatches++ })
	}
}

// watchFrom watches prefix from revision next until the watch closes, and
// returns the revision to watch from again. compacted reports that next
// was compacted away: the returned revision is then the current one's
// successor, and a resync was triggered. delivered is called on events.
func (s *supervisor) watchFrom(ctx context.Context, prefix string, next int64, delivered func()) (int64, bool) {
	// Require a leader: a member cut off from its cluster closes the watch
	// instead of keeping it silently open.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range store.WatchRange(wctx, s.rt.src, watched(prefix), next) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			cur, err := currentRevision(ctx, s.rt.src, prefix)
			if err != nil {
				s.log.Warn("watch compacted; reading the current revision failed", "prefix", prefix, "err", err)
				return next, false
			}
			s.rec.update(func(h *Health) { h.Resyncs++ })
			s.rec.watched(prefix, cur, 0)
			s.log.Info("watch compacted; resyncing", "prefix", prefix, "from", next, "compacted", resp.CompactRevision, "current", cur)
			s.trigger()
			return cur + 1, true
		}
		if err := resp.Err(); err != nil {
			s.log.Debug("watch error", "prefix", prefix, "err", err)
			continue
		}
		if n := len(resp.Events); n > 0 {
			next = resp.Events[n-1].Kv.ModRevision + 1
			s.rec.watched(prefix, next-1, n)
			s.trigger()
			delivered()
		}
	}
	return next, false
}

// watched is the range a Watches entry names: a directory (an entry
// ending in "/") with every key under it, else that one key.
func watched(entry string) store.Range {
	if strings.HasSuffix(entry, "/") {
		return store.Dir(entry)
	}
	return store.Key(entry)
}

package statuspage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultDebounce is how long the hub gathers a burst of store changes
// before it renders once for all of them.
const DefaultDebounce = 250 * time.Millisecond

// rewatchDelay is the wait before watching again after a watch failed.
const rewatchDelay = time.Second

// Hub watches the store prefix and sends each open page the body
// fragment, rendered once per burst of changes.
//
//	watch event --(first of a burst)--> timer(Debounce) --> Read + RenderBody --> every subscriber
//
// Heartbeat writes do not count as changes: the page does not show them
// (the liveness record, which it shows, changes when a node's state does).
type Hub struct {
	Store *store.Store
	// Debounce: DefaultDebounce when zero.
	Debounce time.Duration
	// Now is the clock the page's times are read with (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger

	mu   sync.Mutex
	subs map[chan []byte]struct{}
}

// Subscribe returns a channel that receives each new body fragment (only
// the newest one when the reader lags) and a cancel that ends it.
func (h *Hub) Subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan []byte]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// Subscribers is how many pages are listening.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// View reads the page's view now.
func (h *Hub) View(ctx context.Context) (View, error) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	return Read(ctx, h.Store, now())
}

// Run watches the store until ctx ends; it always returns nil then. A
// failed watch (compaction, a lost member) is opened again and counts as
// a change.
func (h *Hub) Run(ctx context.Context) error {
	debounce := h.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	var timer <-chan time.Time
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		wch := store.WatchRange(clientv3.WithRequireLeader(wctx), h.Store.Client(), store.Dir(""), 0)
		timer = time.After(debounce) // (re)opened: something may have changed unseen
	watching:
		for {
			select {
			case <-ctx.Done():
				cancel()
				return nil
			case resp, ok := <-wch:
				if !ok || resp.Err() != nil {
					if h.Log != nil {
						h.Log.Debug("status page watch ended; watching again", "err", watchErr(resp, ok))
					}
					break watching
				}
				if timer == nil && counts(resp.Events) {
					timer = time.After(debounce)
				}
			case <-timer:
				timer = nil
				h.publish(ctx)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(rewatchDelay):
		}
	}
	return nil
}

func watchErr(resp clientv3.WatchResponse, ok bool) error {
	if !ok {
		return fmt.Errorf("channel closed")
	}
	return resp.Err()
}

// counts tells whether a batch of events holds a change the page shows.
func counts(evs []*clientv3.Event) bool {
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		if !strings.HasPrefix(k, store.HeartbeatsDir) && k != store.NudgeKey {
			return true
		}
	}
	return false
}

// publish renders the body once and hands it to every subscriber.
func (h *Hub) publish(ctx context.Context) {
	if h.Subscribers() == 0 {
		return
	}
	v, err := h.View(ctx)
	if err != nil {
		if h.Log != nil {
			h.Log.Warn("status page not updated", "err", err)
		}
		return
	}
	body, err := RenderBody(v)
	if err != nil {
		if h.Log != nil {
			h.Log.Error("status page not rendered", "err", err)
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case <-ch: // drop the one it has not read yet: this one is newer
		default:
		}
		ch <- body
	}
}

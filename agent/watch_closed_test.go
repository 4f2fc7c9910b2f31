package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// breakableWatcher passes watches through to etcd and ends them on demand,
// as etcd or a lost client does: the channel closes. While paused, new
// watches wait for resume.
type breakableWatcher struct {
	clientv3.Watcher
	mu      sync.Mutex
	calls   int
	breaks  []chan struct{} // one per live watch
	resumed chan struct{}
}

func (w *breakableWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.mu.Lock()
	w.calls++
	resumed := w.resumed
	w.mu.Unlock()
	if resumed != nil {
		select {
		case <-resumed:
		case <-ctx.Done():
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	in := w.Watcher.Watch(wctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	brk := make(chan struct{})
	w.mu.Lock()
	w.breaks = append(w.breaks, brk)
	w.mu.Unlock()
	go func() {
		defer close(out)
		defer cancel()
		for {
			select {
			case resp, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- resp:
				case <-brk:
					return
				}
			case <-brk:
				return
			}
		}
	}()
	return out
}

// breakAll pauses new watches and ends every live one.
func (w *breakableWatcher) breakAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resumed = make(chan struct{})
	for _, b := range w.breaks {
		close(b)
	}
	w.breaks = nil
}

func (w *breakableWatcher) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.resumed)
	w.resumed = nil
}

func (w *breakableWatcher) watchCalls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// countingKV counts reads (namespace.KV reads through Do).
type countingKV struct {
	clientv3.KV
	gets atomic.Int64
}

func (kv *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	kv.gets.Add(1)
	return kv.KV.Get(ctx, key, opts...)
}

func (kv *countingKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if op.IsGet() {
		kv.gets.Add(1)
	}
	return kv.KV.Do(ctx, op)
}

// recordingApplier records the generations it applied.
type recordingApplier struct {
	mu      sync.Mutex
	applied []int64
}

func (r *recordingApplier) Apply(_ context.Context, g apply.Generation) (apply.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, g.Number)
	return apply.Result{Toplevel: "/nix/store/test"}, nil
}

func (r *recordingApplier) Current(context.Context) (string, error) { return "/nix/store/test", nil }

func (r *recordingApplier) has(gen int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.applied {
		if g == gen {
			return true
		}
	}
	return false
}

// TestGenerationsRewatchWhenTheWatchCloses: the generation loop's watch
// channel is closed and a new generation is written while it is closed;
// the second time, etcd is also compacted past that write. The loop must
// not take the closed channel as a wake on every turn (a busy loop
// re-reading etcd); it must watch again, from the last revision it saw (the write
// made meanwhile is not missed; the loop's resync tick is an hour away)
// or, after a compaction, from now with a full re-read, and read etcd only
// a few times.
func TestGenerationsRewatchWhenTheWatchCloses(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	w := &breakableWatcher{Watcher: cli.Watcher}
	kv := &countingKV{KV: cli.KV}
	cli.Watcher, cli.KV = w, kv
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	applier := &recordingApplier{}
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, RetryInterval: time.Hour, Applier: applier}, nil, quietNotifier{}, logging.Test(t))
	a.use(cli, st)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.rt.Run(ctx, a.generations()) }()
	defer func() { cancel(); <-done }()

	desire := func(gen int64) {
		t.Helper()
		key := store.NixosConfigKey("w-1")
		c := api.NewNixosConfiguration("w-1")
		if err := st.Get(t.Context(), key, c); err != nil && gen > 1 {
			t.Fatal(err)
		}
		c.Spec.Generation = gen
		if err := st.Put(t.Context(), key, c); err != nil {
			t.Fatal(err)
		}
	}
	desire(1)
	waitFor(t, 10*time.Second, "generation 1 applied", func() bool { return applier.has(1) })

	for i, compacted := range []bool{false, true} {
		gen := int64(i + 2)
		waitFor(t, 10*time.Second, "a live watch", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.breaks) > 0
		})
		calls := w.watchCalls()
		w.breakAll()
		desire(gen)
		if compacted {
			// Compact past the write, so the watch cannot resume after it.
			resp, err := cli.Put(t.Context(), "compact-here", "x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
				t.Fatal(err)
			}
		}
		before := kv.gets.Load()
		// Give a busy loop time to show: wait for the watch to be asked
		// for again (at once when the closed channel is noticed, or after
		// the backoff), then a little longer on the loop's own reads.
		waitFor(t, 10*time.Second, "watched again", func() bool { return w.watchCalls() > calls || kv.gets.Load()-before > 1000 })
		w.resume()
		waitFor(t, 10*time.Second, "new generation applied", func() bool { return applier.has(gen) })
		if reads := kv.gets.Load() - before; reads > 20 {
			t.Fatalf("compacted=%v: %d reads of etcd between the watch's end and generation %d applied, want a few (a busy loop on the closed channel)", compacted, reads, gen)
		}
	}
}

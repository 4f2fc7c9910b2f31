package controller_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newStore starts a one-member etcd and returns a store over it.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1})
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// faultySource is the store's client with watches the test can close.
type faultySource struct {
	controller.Source
	mu      sync.Mutex
	cancels []context.CancelFunc
	froms   []int64 // the revision each watch was opened from
	// failGets fails that many Gets (reads of the current revision) first.
	failGets int
}

var errUnavailable = errors.New("injected: etcd unavailable")

func (f *faultySource) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	f.mu.Lock()
	fail := f.failGets > 0
	if fail {
		f.failGets--
	}
	f.mu.Unlock()
	if fail {
		return nil, errUnavailable
	}
	return f.Source.Get(ctx, key, opts...)
}

func (f *faultySource) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	ctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.cancels = append(f.cancels, cancel)
	f.froms = append(f.froms, clientv3.OpGet(key, opts...).Rev())
	f.mu.Unlock()
	return f.Source.Watch(ctx, key, opts...)
}

// closeWatches closes every open watch, as a lost connection does.
func (f *faultySource) closeWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cancels {
		c()
	}
	f.cancels = nil
}

func (f *faultySource) watchedFrom() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.froms...)
}

// constant is a backoff of d without jitter, so tests advance the clock
// by exactly d.
func constant(d time.Duration) controller.Option {
	return controller.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(d) })
}

// running runs rt's group of ctrls until the test ends, then checks that
// Run returned nil.
func running(t *testing.T, rt *controller.Runtime, ctrls ...controller.Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx, ctrls...) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// health returns the record of name.
func health(rt *controller.Runtime, name string) controller.Health {
	for _, h := range rt.Health() {
		if h.Name == name {
			return h
		}
	}
	return controller.Health{}
}

func put(t *testing.T, st *store.Store, key string) int64 {
	t.Helper()
	resp, err := st.Client().Put(context.Background(), key, "v")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// counter is a controller that counts the keys under its prefix on each
// reconcile (level-triggered: it reads them, it is not told).
type counter struct {
	st       *store.Store
	name     string
	prefixes []string
	resync   time.Duration
	settle   time.Duration
	// do, when set, runs before the count; its error is the reconcile's.
	do func(ctx context.Context, n int) error

	mu   sync.Mutex
	runs int
	seen []int64 // keys seen by each completed reconcile
}

func (c *counter) Name() string                  { return c.name }
func (c *counter) Watches() []string             { return c.prefixes }
func (c *counter) ResyncInterval() time.Duration { return c.resync }
func (c *counter) SettleDelay() time.Duration    { return c.settle }

func (c *counter) Reconcile(ctx context.Context) error {
	c.mu.Lock()
	c.runs++
	n := c.runs
	c.mu.Unlock()
	if c.do != nil {
		if err := c.do(ctx, n); err != nil {
			return err
		}
	}
	resp, err := c.st.Client().Get(ctx, c.prefixes[0], clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.seen = append(c.seen, resp.Count)
	c.mu.Unlock()
	return nil
}

func (c *counter) completed() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.seen...)
}

func newRuntime(src controller.Source, clk clockwork.Clock, t *testing.T, opts ...controller.Option) *controller.Runtime {
	opts = append([]controller.Option{controller.WithClock(clk), controller.WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	return controller.New(src, opts...)
}

// testWriter sends log lines to t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

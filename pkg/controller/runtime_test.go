package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

func TestReconcilesOnStartAndOnItsOwnPrefixesOnly(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t)
	c := &counter{st: st, name: "count", prefixes: []string{"a/", "b/"}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return len(c.completed()) == 1 })
	put(t, st, "a/1")
	testwait.True(t, 20*time.Second, "a reconcile on a/", func() bool { return len(c.completed()) == 2 })
	put(t, st, "b/1")
	testwait.True(t, 20*time.Second, "a reconcile on b/", func() bool { return len(c.completed()) == 3 })
	put(t, st, "c/1") // not watched
	put(t, st, "a/2")
	testwait.True(t, 20*time.Second, "a reconcile on a/2", func() bool { return len(c.completed()) == 4 })
	if got := c.completed(); got[3] != 2 {
		t.Errorf("the last reconcile counted %d keys under a/, want 2 (it re-reads its inputs)", got[3])
	}
	if h := health(rt, "count"); h.Events != 3 {
		t.Errorf("Events = %d, want 3 (c/1 is not under a watched prefix)", h.Events)
	}
}

// TestAKeyIsWatchedAloneAndADirectoryWhole: an entry without a trailing
// "/" is one key, so a node's own key ("cfg/cp-1") is not woken by the
// keys it is a prefix of ("cfg/cp-10"); an entry ending in "/" is every
// key under it.
func TestAKeyIsWatchedAloneAndADirectoryWhole(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t)
	key := &counter{st: st, name: "key", prefixes: []string{"cfg/cp-1"}}
	dir := &counter{st: st, name: "dir", prefixes: []string{"cfg/"}}
	running(t, rt, key, dir)
	testwait.True(t, 20*time.Second, "the first reconciles", func() bool { return len(key.completed()) == 1 && len(dir.completed()) == 1 })
	put(t, st, "cfg/cp-10")
	put(t, st, "cfg/cp-1/x")
	put(t, st, "cfg/cp-1")
	testwait.For(t, 20*time.Second, "both woken by cfg/cp-1", func() (bool, string) {
		k, d := health(rt, "key"), health(rt, "dir")
		return k.Events == 1 && d.Events == 3, fmt.Sprintf("events: key %d (want 1), dir %d (want 3)", k.Events, d.Events)
	})
	rev := put(t, st, "cfg/cp-100")
	testwait.True(t, 20*time.Second, "dir watched to cfg/cp-100", func() bool { return health(rt, "dir").WatchedTo["cfg/"] == rev })
	if h := health(rt, "key"); h.Events != 1 {
		t.Errorf("the key's controller saw %d events, want 1: cfg/cp-10, cfg/cp-1/x and cfg/cp-100 are other keys", h.Events)
	}
}

// TestWatchedToFollowsEachPrefix: WatchedTo names each watched prefix with
// the revision its watch has delivered up to, starting at the controller's
// start revision; a put elsewhere moves no prefix.
func TestWatchedToFollowsEachPrefix(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t)
	start := put(t, st, "c/0")
	c := &counter{st: st, name: "to", prefixes: []string{"a/", "b/"}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "both watches started", func() bool { return len(health(rt, "to").WatchedTo) == 2 })
	if h := health(rt, "to"); h.WatchedTo["a/"] < start || h.WatchedTo["b/"] != h.WatchedTo["a/"] {
		t.Errorf("WatchedTo = %v at the start, want both prefixes at the start revision (>= %d)", h.WatchedTo, start)
	}
	startRev := health(rt, "to").WatchedTo["b/"]
	ra := put(t, st, "a/1")
	put(t, st, "c/1") // not watched
	testwait.For(t, 20*time.Second, "a/ watched to its put", func() (bool, string) {
		h := health(rt, "to")
		return h.WatchedTo["a/"] == ra, fmt.Sprintf("%v, a/1 at %d", h.WatchedTo, ra)
	})
	if h := health(rt, "to"); h.WatchedTo["b/"] != startRev || h.Events != 1 {
		t.Errorf("WatchedTo = %v, Events = %d: want b/ still at %d and one event", h.WatchedTo, h.Events, startRev)
	}
	// The snapshot is a copy: changing it changes no record.
	h := health(rt, "to")
	h.WatchedTo["a/"] = 0
	if health(rt, "to").WatchedTo["a/"] != ra {
		t.Error("a Health snapshot's WatchedTo aliases the record's")
	}
}

func TestCoalescesABurstIntoOneReconcile(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t)
	gate, entered := make(chan struct{}), make(chan struct{})
	c := &counter{st: st, name: "burst", prefixes: []string{"in/"}, do: func(ctx context.Context, n int) error {
		if n == 1 {
			close(entered)
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	stop := running(t, rt, c)
	<-entered // the watch's start revision is read: every put below is an event
	const burst = 50
	for i := range burst {
		put(t, st, fmt.Sprintf("in/%d", i))
	}
	testwait.True(t, 20*time.Second, "every event of the burst", func() bool { return health(rt, "burst").Events == burst })
	close(gate)
	testwait.True(t, 20*time.Second, "the reconcile after the burst", func() bool { return len(c.completed()) == 2 })
	stop()
	if got := c.completed(); len(got) != 2 || got[1] != burst {
		t.Errorf("reconciles saw %v keys, want [? %d]: %d events must make one reconcile", got, burst, burst)
	}
}

// TestSettleGathersEventsIntoOneLaterReconcile: a controller with a settle
// delay reconciles at once when it starts, but after an event it waits
// the delay on the runtime's clock, and the one reconcile after it sees
// every write made meanwhile.
func TestSettleGathersEventsIntoOneLaterReconcile(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t)
	c := &counter{st: st, name: "settled", prefixes: []string{"in/"}, settle: time.Second}
	stop := running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile, not delayed", func() bool { return len(c.completed()) == 1 })
	put(t, st, "in/1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no settle timer after the event: %v", err)
	}
	put(t, st, "in/2")
	put(t, st, "in/3")
	testwait.True(t, 20*time.Second, "the events seen", func() bool { return health(rt, "settled").Events == 3 })
	if got := c.completed(); len(got) != 1 {
		t.Fatalf("reconciles %v before the settle delay passed, want only the first", got)
	}
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the reconcile after the settle delay", func() bool { return len(c.completed()) == 2 })
	stop()
	if got := c.completed(); len(got) != 2 || got[1] != 3 {
		t.Errorf("reconciles saw %v keys, want [0 3]: the events of one settle delay make one reconcile", got)
	}
}

func TestWatchesAgainFromTheLastRevisionAfterAClose(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	src := &faultySource{Source: st.Client()}
	rt := newRuntime(src, clk, t, constant(time.Second))
	c := &counter{st: st, name: "rewatch", prefixes: []string{"in/"}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return len(c.completed()) == 1 })
	rev := put(t, st, "in/1")
	testwait.True(t, 20*time.Second, "the reconcile on in/1", func() bool { return len(c.completed()) == 2 })

	src.closeWatches()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil { // the re-watch backoff
		t.Fatal(err)
	}
	put(t, st, "in/2") // while no watch is open
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the reconcile on in/2, written while the watch was closed", func() bool { return len(c.completed()) == 3 })
	if froms := src.watchedFrom(); len(froms) != 2 || froms[1] != rev+1 {
		t.Errorf("watches opened from %v, want the second from %d (after the last event delivered)", froms, rev+1)
	}
	if h := health(rt, "rewatch"); h.Restarts != 0 || h.Resyncs != 0 || h.Rewatches != 1 {
		t.Errorf("after a closed watch: %+v; want one rewatch, no restart or resync", h)
	}
}

func TestResyncsWhenItsRevisionWasCompacted(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	src := &faultySource{Source: st.Client()}
	rt := newRuntime(src, clk, t, constant(time.Second))
	c := &counter{st: st, name: "compact", prefixes: []string{"in/"}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return len(c.completed()) == 1 })

	src.closeWatches()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	put(t, st, "in/1")
	rev := put(t, st, "in/2")
	if _, err := st.Client().Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the resync", func() bool { return health(rt, "compact").Resyncs == 1 })
	testwait.True(t, 20*time.Second, "the reconcile of the resync", func() bool { return len(c.completed()) == 2 })
	if got := c.completed()[1]; got != 2 {
		t.Errorf("the resync counted %d keys, want 2", got)
	}
	froms := src.watchedFrom()
	if len(froms) != 3 || froms[2] != rev+1 {
		t.Fatalf("watches opened from %v, want a third from the current revision's successor %d", froms, rev+1)
	}
	put(t, st, "in/3")
	testwait.True(t, 20*time.Second, "a reconcile on the watch opened after the resync", func() bool { return len(c.completed()) == 3 })
}

func TestRequeuesAFailedReconcileWithBackoff(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t, constant(time.Second), controller.WithHealthPolicy(2, 0))
	errFlaky := errors.New("flaky")
	c := &counter{st: st, name: "flaky", prefixes: []string{"in/"}, do: func(_ context.Context, n int) error {
		if n <= 2 {
			return errFlaky
		}
		return nil
	}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first failure", func() bool { return health(rt, "flaky").Failures == 1 })
	if h := health(rt, "flaky"); h.State != controller.Backoff || !errors.Is(h.LastError, errFlaky) || !rt.Healthy() {
		t.Errorf("after one failure: %+v healthy=%v; want backoff, the error, healthy", h, rt.Healthy())
	}
	clk.Advance(999 * time.Millisecond)
	if h := health(rt, "flaky"); h.Reconciles != 1 {
		t.Fatalf("retried before its backoff: %+v", h)
	}
	clk.Advance(time.Millisecond)
	testwait.True(t, 20*time.Second, "the second failure", func() bool { return health(rt, "flaky").Failures == 2 })
	if rt.Healthy() {
		t.Error("Healthy after two failures in a row, with a policy of two")
	}
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the success", func() bool { h := health(rt, "flaky"); return h.Failures == 0 && !h.LastSuccess.IsZero() })
	if !rt.Healthy() {
		t.Errorf("not Healthy after a success: %+v", rt.Health())
	}
	if h := health(rt, "flaky"); h.Restarts != 0 || h.Reconciles != 3 {
		t.Errorf("after two failures and a success: %+v; want 3 reconciles, no restart", h)
	}
}

func TestRestartsAPanickingControllerAfterBackoff(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	src := &faultySource{Source: st.Client()}
	rt := newRuntime(src, clk, t, constant(time.Second))
	c := &counter{st: st, name: "panics", prefixes: []string{"in/"}, do: func(_ context.Context, n int) error {
		if n == 1 {
			panic("boom")
		}
		return nil
	}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the restart", func() bool { return health(rt, "panics").State == controller.Restarting })
	h := health(rt, "panics")
	if h.Restarts != 1 || h.LastError == nil || rt.Healthy() {
		t.Errorf("after a panic: %+v healthy=%v; want one restart, its error, unhealthy", h, rt.Healthy())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the reconcile after the restart", func() bool { return len(c.completed()) == 1 })
	if !rt.Healthy() {
		t.Errorf("not Healthy after the restart's success: %+v", rt.Health())
	}
	if n := len(src.watchedFrom()); n != 2 {
		t.Errorf("%d watches opened, want 2: a restart opens its watches anew", n)
	}
}

func TestResyncTick(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t)
	c := &counter{st: st, name: "tick", prefixes: []string{"in/"}, resync: 10 * time.Second}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return len(c.completed()) == 1 })
	clk.Advance(10 * time.Second)
	testwait.True(t, 20*time.Second, "the resync reconcile", func() bool { return len(c.completed()) == 2 })
}

func TestStallIsUnhealthy(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t, controller.WithHealthPolicy(3, time.Minute))
	c := &counter{st: st, name: "stall", prefixes: []string{"in/"}, do: func(ctx context.Context, _ int) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the reconcile", func() bool { return health(rt, "stall").State == controller.Reconciling })
	if !rt.Healthy() {
		t.Error("unhealthy at once")
	}
	clk.Advance(time.Minute)
	if rt.Healthy() {
		t.Error("Healthy with a reconcile running for a minute, stallAfter a minute")
	}
}

func TestFatalErrorStopsTheGroupInReverseOrder(t *testing.T) {
	st := newStore(t)
	errDeposed := errors.New("deposed")
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t, controller.WithFatal(func(err error) bool { return errors.Is(err, errDeposed) }))
	var mu sync.Mutex
	var stopped []string
	var started sync.WaitGroup
	blocking := func(name string) controller.Controller {
		started.Add(1)
		return &controller.Func{ControllerName: name, Prefixes: []string{name + "/"}, Do: func(ctx context.Context) error {
			started.Done()
			<-ctx.Done()
			mu.Lock()
			stopped = append(stopped, name)
			mu.Unlock()
			return ctx.Err()
		}}
	}
	first, second := blocking("first"), blocking("second")
	go func() {
		started.Wait()
		put(t, st, "fatal/go")
	}()
	fatal := &controller.Func{ControllerName: "fatal", Prefixes: []string{"fatal/"}, Do: func(ctx context.Context) error {
		resp, err := st.Client().Get(ctx, "fatal/go")
		if err != nil || len(resp.Kvs) == 0 {
			return err
		}
		return fmt.Errorf("write: %w", errDeposed)
	}}
	err := rt.Run(context.Background(), first, second, fatal)
	if !errors.Is(err, errDeposed) {
		t.Fatalf("Run = %v, want the fatal error", err)
	}
	if want := []string{"second", "first"}; !slices.Equal(stopped, want) {
		t.Errorf("stopped %v, want %v (reverse order)", stopped, want)
	}
	for _, h := range rt.Health() {
		if h.Running || h.State != controller.Stopped {
			t.Errorf("after Run: %+v; want stopped", h)
		}
	}
	// The group can run again (a new leadership term).
	stop := running(t, rt, &controller.Func{ControllerName: "first", Prefixes: []string{"first/"}, Do: func(context.Context) error { return nil }})
	testwait.True(t, 20*time.Second, "the second run", func() bool { return health(rt, "first").Running && !health(rt, "first").LastSuccess.IsZero() })
	stop()
}

func TestRefusesBadDeclarations(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t)
	nop := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name  string
		ctrls []controller.Controller
	}{
		{"no name", []controller.Controller{&controller.Func{Prefixes: []string{"a/"}, Do: nop}}},
		{"no watches, no tick", []controller.Controller{&controller.Func{ControllerName: "x", Do: nop}}},
		{"whole keyspace", []controller.Controller{&controller.Func{ControllerName: "x", Prefixes: []string{"a/", ""}, Do: nop}}},
		{"twice", []controller.Controller{&controller.Func{ControllerName: "x", Prefixes: []string{"a/"}, Do: nop}, &controller.Func{ControllerName: "x", Prefixes: []string{"b/"}, Do: nop}}},
	} {
		if err := rt.Run(context.Background(), tc.ctrls...); !errors.Is(err, controller.ErrInvalid) {
			t.Errorf("%s: Run = %v, want ErrInvalid", tc.name, err)
		}
	}
	running(t, rt, &controller.Func{ControllerName: "x", Prefixes: []string{"a/"}, Do: nop})
	testwait.True(t, 20*time.Second, "x running", func() bool { return health(rt, "x").Running })
	if err := rt.Run(context.Background(), &controller.Func{ControllerName: "x", Prefixes: []string{"a/"}, Do: nop}); !errors.Is(err, controller.ErrRunning) {
		t.Errorf("a second x: Run = %v, want ErrRunning", err)
	}
}

func TestRestartsAControllerThatCannotStart(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	src := &faultySource{Source: st.Client(), failGets: 1}
	rt := newRuntime(src, clk, t, constant(time.Second))
	c := &counter{st: st, name: "nostart", prefixes: []string{"in/"}}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the restart", func() bool { return health(rt, "nostart").State == controller.Restarting })
	if h := health(rt, "nostart"); h.Restarts != 1 || !errors.Is(h.LastError, errUnavailable) || h.Reconciles != 0 || rt.Healthy() {
		t.Errorf("after a failed start: %+v healthy=%v; want one restart for the injected error, no reconcile, unhealthy", h, rt.Healthy())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	testwait.True(t, 20*time.Second, "the reconcile after the restart", func() bool { return len(c.completed()) == 1 })
	put(t, st, "in/1")
	testwait.True(t, 20*time.Second, "a reconcile on its watch", func() bool { return len(c.completed()) == 2 })
}

// TestTickOnlyController: a controller that watches nothing but has a
// resync interval reconciles at start and on each tick, and never reads
// the store (its inputs have no watch).
func TestTickOnlyController(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	src := &faultySource{Source: st.Client(), failGets: 1 << 30}
	rt := newRuntime(src, clk, t)
	var runs atomic.Int64
	c := &controller.Func{ControllerName: "tick-only", Resync: time.Minute, Do: func(context.Context) error { runs.Add(1); return nil }}
	running(t, rt, c)
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return runs.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil { // the ticker
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	testwait.True(t, 20*time.Second, "the tick's reconcile", func() bool { return runs.Load() == 2 })
	if h := health(rt, "tick-only"); h.Restarts != 0 || !rt.Healthy() {
		t.Errorf("health %+v: want no restarts and healthy (it must not read the revision)", h)
	}
	if n := len(src.watchedFrom()); n != 0 {
		t.Errorf("%d watches opened, want none", n)
	}
}

// TestControllerHealthPolicy: a controller's own rule (Policied) overrides
// the runtime's: one that may reconcile for long never counts as stalled,
// one that tolerates more failures stays healthy through them.
func TestControllerHealthPolicy(t *testing.T) {
	st := newStore(t)
	clk := clockwork.NewFakeClock()
	rt := newRuntime(st.Client(), clk, t, controller.WithHealthPolicy(1, time.Minute), constant(time.Hour))
	long := &controller.Func{ControllerName: "long", Prefixes: []string{"long/"}, Policy: controller.HealthPolicy{StallAfter: -1},
		Do: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	errFlaky := errors.New("flaky")
	tolerant := &controller.Func{ControllerName: "tolerant", Prefixes: []string{"tolerant/"}, Policy: controller.HealthPolicy{MaxFailures: 2},
		Do: func(context.Context) error { return errFlaky }}
	running(t, rt, long, tolerant)
	testwait.True(t, 20*time.Second, "long reconciling, tolerant failed once", func() bool {
		return health(rt, "long").State == controller.Reconciling && health(rt, "tolerant").Failures == 1
	})
	clk.Advance(2 * time.Minute)
	if !rt.Healthy() {
		t.Errorf("unhealthy: %+v; want a never-stalling reconcile and one failure of two allowed to be healthy", rt.Health())
	}
	put(t, st, "tolerant/again")
	testwait.True(t, 20*time.Second, "tolerant failed twice", func() bool { return health(rt, "tolerant").Failures == 2 })
	if rt.Healthy() {
		t.Error("healthy after two failures in a row of a controller that allows fewer than two")
	}
}

// TestWakerWakesItsController: a receive from a controller's Wakes
// triggers a reconcile, with no store event and no tick.
func TestWakerWakesItsController(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(st.Client(), clockwork.NewFakeClock(), t)
	wake := make(chan struct{})
	var runs atomic.Int64
	running(t, rt, &controller.Func{ControllerName: "woken", Resync: time.Hour, Wake: wake, Do: func(context.Context) error { runs.Add(1); return nil }})
	testwait.True(t, 20*time.Second, "the first reconcile", func() bool { return runs.Load() == 1 })
	wake <- struct{}{}
	testwait.True(t, 20*time.Second, "the woken reconcile", func() bool { return runs.Load() == 2 })
}

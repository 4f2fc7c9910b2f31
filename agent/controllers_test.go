package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/logging"
	"github.com/jonboulle/clockwork"
)

// TestHealthyFollowsTheControllers: a ready agent whose controller keeps
// failing stops being Healthy (so the watchdog stops being fed) once it
// failed agentMaxFailures times in a row, not before, and is Healthy again
// after its next success. The agent used to stay Healthy whatever its
// loops did (errors of the renewer, the join endpoint, the hypervisor
// controller were logged only).
func TestHealthyFollowsTheControllers(t *testing.T) {
	clk := clockwork.NewFakeClock()
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, Clock: clk}, nil, quietNotifier{}, logging.Test(t))
	a.healthy.Store(true) // the bring-up is done
	var fail atomic.Bool
	fail.Store(true)
	var runs atomic.Int64
	flaky := &controller.Func{ControllerName: "flaky", Resync: time.Hour, Do: func(context.Context) error {
		runs.Add(1)
		if fail.Load() {
			return errors.New("injected failure")
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	g := (&groups{rt: a.rt}).start(ctx, flaky)
	defer g.stop()
	retry := func(n int64) {
		t.Helper()
		// The resync ticker and the retry timer wait on the clock.
		if err := clk.BlockUntilContext(ctx, 2); err != nil {
			t.Fatal(err)
		}
		clk.Advance(40 * time.Second) // beyond the longest backoff, jittered
		waitFor(t, 10*time.Second, "the retry", func() bool { return runs.Load() >= n })
	}
	waitFor(t, 10*time.Second, "the first reconcile", func() bool { return runs.Load() == 1 })
	for n := int64(2); n < agentMaxFailures; n++ {
		if !a.Healthy() {
			t.Fatalf("unhealthy after %d failures in a row; want %d first", n-1, agentMaxFailures)
		}
		retry(n)
	}
	retry(agentMaxFailures)
	waitFor(t, 10*time.Second, "the last failure recorded", func() bool { return !a.Healthy() })
	fail.Store(false)
	retry(agentMaxFailures + 1)
	waitFor(t, 10*time.Second, "healthy after a success", a.Healthy)
}

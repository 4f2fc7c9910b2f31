package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/controller/conformance"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// TestHealthyFollowsTheControllers: a ready agent whose controller keeps
// failing stops being Healthy (so the watchdog stops being fed) once it
// failed agentMaxFailures times in a row, not before, and is Healthy again
// after its next success: errors of the renewer, the join endpoint or the
// hypervisor controller are not only logged.
func TestHealthyFollowsTheControllers(t *testing.T) {
	clk := clockwork.NewFakeClock()
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, Clock: clk}, nil, quietNotifier{}, logging.Test(t))
	a.state.setUp(true) // the bring-up is done
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

// TestAgentControllersConform: the heartbeat, the removal watch and the
// generations controller keep the runtime's contract (package
// conformance).
func TestAgentControllersConform(t *testing.T) {
	st := oneMemberStore(t)
	newAgent := func(t *testing.T) *Agent {
		a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, HeartbeatTTL: time.Hour}, nil, quietNotifier{}, logging.Test(t))
		a.use(st.Client(), st)
		return a
	}
	if err := st.Put(context.Background(), store.RemovalKey("w-1"), api.NewRemoveRequest("w-1")); err != nil {
		t.Fatal(err)
	}
	// A heartbeat revokes its lease once its context ended, which writes:
	// each check waits for the previous check's heartbeat to be done.
	var hbs []*heartbeat
	settle := func() {
		for _, hb := range hbs {
			hb.wait()
		}
	}
	t.Run("heartbeat", func(t *testing.T) {
		conformance.Run(t, conformance.Case{Store: st, New: func(t *testing.T) controller.Controller {
			settle()
			hb := newAgent(t).newHeartbeat()
			hbs = append(hbs, hb)
			return hb
		}})
	})
	settle()
	t.Run("removal", func(t *testing.T) {
		conformance.Run(t, conformance.Case{Store: st, New: func(t *testing.T) controller.Controller { return newAgent(t).removal.watch() }})
	})
	c := api.NewNixosConfiguration("w-1")
	c.Spec.Generation = 1
	if err := st.Put(context.Background(), store.NixosConfigKey("w-1"), c); err != nil {
		t.Fatal(err)
	}
	t.Run("generations", func(t *testing.T) {
		conformance.Run(t, conformance.Case{Store: st, New: func(t *testing.T) controller.Controller {
			a := newAgent(t)
			a.cfg.Applier = &recordingApplier{}
			return a.generations()
		}})
	})
}

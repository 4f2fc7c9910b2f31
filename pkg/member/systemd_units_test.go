package member_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/systemdtest"
	"github.com/homystack/nico/pkg/testwait"
)

// unitManagerContract runs the cases every UnitManager must pass. unit is a
// unit that is safe to start, stop and kill, with a main process that runs
// until it is stopped, and inactive at first.
func unitManagerContract(t *testing.T, units member.UnitManager, unit string) {
	ctx := caseContext(t)
	t.Run("UnknownUnit", func(t *testing.T) {
		const ghost = "nico-no-such-unit-4f1c.service"
		if _, err := units.UnitState(ctx, ghost); !errors.Is(err, member.ErrNoUnit) {
			t.Fatalf("UnitState(%s) = %v, want ErrNoUnit", ghost, err)
		}
		if err := units.StartUnit(ctx, ghost); !errors.Is(err, member.ErrNoUnit) {
			t.Fatalf("StartUnit(%s) = %v, want ErrNoUnit", ghost, err)
		}
		if err := units.KillUnit(ctx, ghost, syscall.SIGKILL); !errors.Is(err, member.ErrNoUnit) {
			t.Fatalf("KillUnit(%s) = %v, want ErrNoUnit", ghost, err)
		}
	})
	t.Run("Kill", func(t *testing.T) {
		t.Cleanup(func() { _ = units.StopUnit(context.Background(), unit) })
		if err := units.KillUnit(ctx, unit, syscall.SIGKILL); err == nil {
			t.Fatal("KillUnit of an inactive unit succeeded, want an error: it has no main process")
		}
		if err := units.StartUnit(ctx, unit); err != nil {
			t.Fatalf("StartUnit: %v", err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		states, err := units.WatchUnit(wctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		if err := units.KillUnit(ctx, unit, syscall.SIGKILL); err != nil {
			t.Fatalf("KillUnit of a running unit: %v", err)
		}
		waitWatched(ctx, t, states, false)
		if st, _ := units.UnitState(ctx, unit); st.Active != "failed" {
			t.Fatalf("state of %s after SIGKILL is %s, want failed", unit, st)
		}
		if err := units.StartUnit(ctx, unit); err != nil {
			t.Fatalf("StartUnit after SIGKILL: %v", err)
		}
		assertState(ctx, t, units, unit, true)
		if err := units.StopUnit(ctx, unit); err != nil {
			t.Fatal(err)
		}
		assertState(ctx, t, units, unit, false)
	})
	t.Run("StartStopRestart", func(t *testing.T) {
		t.Cleanup(func() { _ = units.StopUnit(context.Background(), unit) })
		wctx, cancel := context.WithCancel(ctx)
		states, err := units.WatchUnit(wctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		if st := <-states; !st.Exited() {
			t.Fatalf("first watched state %s, want inactive", st)
		}
		if err := units.StartUnit(ctx, unit); err != nil {
			t.Fatalf("StartUnit: %v", err)
		}
		assertState(ctx, t, units, unit, true)
		waitWatched(ctx, t, states, true)
		if err := units.StartUnit(ctx, unit); err != nil {
			t.Fatalf("StartUnit on a running unit: %v", err)
		}
		if err := units.RestartUnit(ctx, unit); err != nil {
			t.Fatalf("RestartUnit: %v", err)
		}
		assertState(ctx, t, units, unit, true)
		for i := range 2 {
			if err := units.StopUnit(ctx, unit); err != nil {
				t.Fatalf("StopUnit #%d: %v", i+1, err)
			}
		}
		assertState(ctx, t, units, unit, false)
		waitWatched(ctx, t, states, false)
		if err := units.RestartUnit(ctx, unit); err != nil {
			t.Fatalf("RestartUnit of a stopped unit: %v", err)
		}
		assertState(ctx, t, units, unit, true)
		cancel()
		for range states { // closed once ctx ends
		}
	})
}

func assertState(ctx context.Context, t *testing.T, units member.UnitManager, unit string, running bool) {
	t.Helper()
	st, err := units.UnitState(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running() != running || st.Exited() == running {
		t.Fatalf("state of %s is %s, want running=%v", unit, st, running)
	}
}

// waitWatched reads states until one is running (or exited), as wanted.
func waitWatched(ctx context.Context, t *testing.T, states <-chan member.UnitState, running bool) {
	t.Helper()
	for {
		select {
		case st, ok := <-states:
			if !ok {
				t.Fatal("watch closed early")
			}
			if (running && st.Running()) || (!running && st.Exited()) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("watch never showed running=%v", running)
		}
	}
}

func TestFakeUnitsContract(t *testing.T) {
	t.Parallel()
	u := systemdtest.NewUnits()
	u.Add("sleep.service", systemdtest.NewSleeper())
	unitManagerContract(t, u, "sleep.service")
}

// TestDBusUnitsContract runs the contract on the real systemd. It needs a
// system bus and a unit that is safe to start and stop, named in
// NICO_SYSTEMD_TEST_UNIT (for example a simple unit running
// `sleep infinity`); the build machines have neither.
func TestDBusUnitsContract(t *testing.T) {
	t.Parallel()
	unit := os.Getenv("NICO_SYSTEMD_TEST_UNIT")
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("systemd is not PID 1 here (no /run/systemd/system); the D-Bus unit manager cannot be tested")
	}
	if unit == "" {
		t.Skip("set NICO_SYSTEMD_TEST_UNIT to a unit that is safe to start and stop to run this test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	units, err := member.DialSystemd(ctx, 100*time.Millisecond)
	if err != nil {
		t.Skipf("no system bus: %v", err)
	}
	defer units.Close()
	unitManagerContract(t, units, unit)
}

func TestFakeUnitsInjectedFailures(t *testing.T) {
	t.Parallel()
	ctx := caseContext(t)
	u := systemdtest.NewUnits()
	s := systemdtest.NewSleeper()
	u.Add("sleep.service", s)
	boom := errors.New("boom")
	u.FailJobs(func(verb, _ string) error {
		if verb == "start" {
			return boom
		}
		return nil
	})
	if err := u.StartUnit(ctx, "sleep.service"); !errors.Is(err, boom) {
		t.Fatalf("StartUnit with an injected failure = %v, want boom", err)
	}
	u.FailJobs(nil)
	if err := u.StartUnit(ctx, "sleep.service"); err != nil {
		t.Fatal(err)
	}
	if err := u.Crash("sleep.service", boom); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, caseTimeout, "the crashed unit failed", func() (bool, string) {
		st, _ := u.UnitState(ctx, "sleep.service")
		return st.Active == "failed", fmt.Sprintf("state after a crash = %s, want failed", st)
	})
	lines, _ := u.Lines(ctx, "sleep.service", time.Time{})
	if len(lines) == 0 {
		t.Fatal("no journal line for the crash")
	}
}

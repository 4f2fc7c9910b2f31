package member

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// ErrNoUnit is returned for a unit that systemd does not know.
var ErrNoUnit = errors.New("member: no such systemd unit")

// ErrUnitJob is returned when a systemd job (start, stop, restart) ends in
// another result than "done": "failed", "timeout", "canceled", "dependency".
var ErrUnitJob = errors.New("member: systemd job did not complete")

// UnitState is what the Systemd runtime reads of a unit: systemd's
// ActiveState ("active", "activating", "deactivating", "inactive",
// "failed", "reloading") and SubState ("running", "dead", ...).
type UnitState struct {
	Active string
	Sub    string
}

// Running reports whether the unit runs: active or reloading.
func (s UnitState) Running() bool { return s.Active == "active" || s.Active == "reloading" }

// Exited reports whether the unit has stopped: inactive or failed.
func (s UnitState) Exited() bool {
	return s.Active == "inactive" || s.Active == "failed" || s.Active == ""
}

func (s UnitState) String() string { return s.Active + "/" + s.Sub }

// UnitManager is the part of systemd the Systemd runtime uses. Start, stop
// and restart return once systemd's job has completed (for a Type=notify
// service, once it has sent READY=1), or with ErrUnitJob when the job ended
// otherwise, or with ctx's error.
//
// DBusUnits is the real one; systemdtest.Units is a memory fake. Both pass
// the same contract test (systemd_units_test.go).
type UnitManager interface {
	StartUnit(ctx context.Context, name string) error
	StopUnit(ctx context.Context, name string) error
	RestartUnit(ctx context.Context, name string) error
	// UnitState returns the unit's state, ErrNoUnit when it is not known.
	UnitState(ctx context.Context, name string) (UnitState, error)
	// KillUnit sends signal to the unit's main process and returns once it
	// is sent, not once the process has exited; it fails for a unit with
	// no main process (one that is not running), ErrNoUnit for an unknown
	// unit. A unit whose main process dies by SIGKILL ends up "failed",
	// and a pending start job of it fails.
	KillUnit(ctx context.Context, name string, signal syscall.Signal) error
	// WatchUnit sends the unit's current state at once, then each change,
	// until ctx ends; then it closes the channel. A reader that falls behind
	// gets the latest state, not every transition.
	WatchUnit(ctx context.Context, name string) (<-chan UnitState, error)
}

// DBusUnits is a UnitManager over systemd's D-Bus API on the system bus.
type DBusUnits struct {
	conn *sddbus.Conn
	poll time.Duration
}

var _ UnitManager = (*DBusUnits)(nil)

// DialSystemd connects to systemd (PID 1) on the system bus. WatchUnit
// re-reads the unit's state every poll (1s when zero). Close it when done.
func DialSystemd(ctx context.Context, poll time.Duration) (*DBusUnits, error) {
	conn, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("member: connect to systemd: %w", err)
	}
	if poll <= 0 {
		poll = time.Second
	}
	return &DBusUnits{conn: conn, poll: poll}, nil
}

// Close closes the D-Bus connection.
func (d *DBusUnits) Close() { d.conn.Close() }

type jobFunc func(ctx context.Context, name, mode string, ch chan<- string) (int, error)

// job runs one systemd job in "replace" mode and waits for its result.
func (d *DBusUnits) job(ctx context.Context, verb string, fn jobFunc, name string) error {
	ch := make(chan string, 1) // buffered: go-systemd blocks on an unread result
	if _, err := fn(ctx, name, "replace", ch); err != nil {
		if _, serr := d.UnitState(ctx, name); errors.Is(serr, ErrNoUnit) {
			return fmt.Errorf("member: %s %s: %w", verb, name, ErrNoUnit)
		}
		return fmt.Errorf("member: %s %s: %w", verb, name, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("member: %s %s: %w: result %q", verb, name, ErrUnitJob, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("member: %s %s: %w", verb, name, ctx.Err())
	}
}

// StartUnit starts the unit and waits for the job.
func (d *DBusUnits) StartUnit(ctx context.Context, name string) error {
	return d.job(ctx, "start", d.conn.StartUnitContext, name)
}

// StopUnit stops the unit and waits for the job.
func (d *DBusUnits) StopUnit(ctx context.Context, name string) error {
	return d.job(ctx, "stop", d.conn.StopUnitContext, name)
}

// RestartUnit restarts (or starts) the unit and waits for the job.
func (d *DBusUnits) RestartUnit(ctx context.Context, name string) error {
	return d.job(ctx, "restart", d.conn.RestartUnitContext, name)
}

// KillUnit sends signal to the unit's main process (systemd's KillUnit
// with whom "main").
func (d *DBusUnits) KillUnit(ctx context.Context, name string, signal syscall.Signal) error {
	if err := d.conn.KillUnitWithTarget(ctx, name, sddbus.Main, int32(signal)); err != nil {
		if _, serr := d.UnitState(ctx, name); errors.Is(serr, ErrNoUnit) {
			return fmt.Errorf("member: kill %s: %w", name, ErrNoUnit)
		}
		return fmt.Errorf("member: kill %s with %s: %w", name, signal, err)
	}
	return nil
}

// UnitState reads ActiveState and SubState; a unit whose LoadState is
// "not-found" is ErrNoUnit.
func (d *DBusUnits) UnitState(ctx context.Context, name string) (UnitState, error) {
	props, err := d.conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return UnitState{}, fmt.Errorf("member: state of %s: %w", name, err)
	}
	str := func(k string) string { s, _ := props[k].(string); return s }
	if str("LoadState") == "not-found" {
		return UnitState{}, fmt.Errorf("member: state of %s: %w", name, ErrNoUnit)
	}
	return UnitState{Active: str("ActiveState"), Sub: str("SubState")}, nil
}

// WatchUnit polls the unit's state (level-triggered: each read is the whole
// state) and sends it when it changed. A failed read is retried at the next
// tick.
func (d *DBusUnits) WatchUnit(ctx context.Context, name string) (<-chan UnitState, error) {
	first, err := d.UnitState(ctx, name)
	if err != nil {
		return nil, err
	}
	return watchByPolling(ctx, first, d.poll, func(ctx context.Context) (UnitState, error) { return d.UnitState(ctx, name) }), nil
}

// watchByPolling sends first, then every state read that differs from the
// last one sent. The channel holds one state; a newer one replaces an unread
// older one.
func watchByPolling(ctx context.Context, first UnitState, every time.Duration, read func(context.Context) (UnitState, error)) <-chan UnitState {
	ch := make(chan UnitState, 1)
	ch <- first
	go func() {
		defer close(ch)
		last := first
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := read(ctx)
			if err != nil || st == last {
				continue
			}
			last = st
			select { // drop an unread older state
			case <-ch:
			default:
			}
			ch <- st
		}
	}()
	return ch
}

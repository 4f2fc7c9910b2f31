// Package systemdtest provides an in-memory member.UnitManager and
// member.Journal, for tests of the Systemd runtime on machines without
// systemd as PID 1. A unit is backed by a Service: Sleeper runs until
// stopped, Etcd runs a real embedded etcd member configured from the
// environment file, like nixpkgs' etcd.service.
package systemdtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/member"
)

// ExitLogger is a Service that logs when it exits; Units appends its lines
// to the unit's journal before the unit's state changes, as journald has a
// service's last words before systemd reports the exit.
type ExitLogger interface {
	ExitLines(err error) []string
}

// Service is what a fake unit runs. Start returns once the service is
// ready (a Type=notify unit's READY=1) or failed.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
}

// Units is an in-memory member.UnitManager and member.Journal. The zero
// value is not usable; call NewUnits.
type Units struct {
	mu      sync.Mutex
	units   map[string]*unit
	journal []entry
	failJob func(verb, name string) error
	jobs    []string
}

type unit struct {
	svc      Service
	state    member.UnitState
	gen      int // bumped by each start, so an old exit is ignored
	killed   int // the gen whose service KillUnit stopped
	watchers []chan member.UnitState
}

type entry struct {
	at   time.Time
	unit string
	line string
}

var (
	_ member.UnitManager = (*Units)(nil)
	_ member.Journal     = (*Units)(nil)
)

var inactive = member.UnitState{Active: "inactive", Sub: "dead"}

// NewUnits returns a fake systemd with no units.
func NewUnits() *Units { return &Units{units: map[string]*unit{}} }

// Add defines unit name, backed by svc.
func (u *Units) Add(name string, svc Service) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.units[name] = &unit{svc: svc, state: inactive}
}

// FailJobs makes each later job call fn first (verb is start, stop or
// restart); a non-nil error fails the job with it. nil restores success.
func (u *Units) FailJobs(fn func(verb, name string) error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failJob = fn
}

// Jobs returns the jobs run so far, as "verb name".
func (u *Units) Jobs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.jobs...)
}

// Log appends a journal line for unit, as the service would log it.
func (u *Units) Log(name, line string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.journal = append(u.journal, entry{at: time.Now(), unit: name, line: line})
}

// Lines returns unit's journal lines logged at or after since.
func (u *Units) Lines(_ context.Context, name string, since time.Time) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, e := range u.journal {
		if e.unit == name && !e.at.Before(since) {
			out = append(out, e.line)
		}
	}
	return out, nil
}

func (u *Units) get(verb, name string) (*unit, error) {
	u.mu.Lock()
	u.jobs = append(u.jobs, verb+" "+name)
	un, ok := u.units[name]
	failJob := u.failJob
	u.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("systemdtest: %s %s: %w", verb, name, member.ErrNoUnit)
	}
	// Called without u.mu: a hook may drive the units itself.
	if failJob != nil {
		if err := failJob(verb, name); err != nil {
			return nil, fmt.Errorf("systemdtest: %s %s: %w", verb, name, err)
		}
	}
	return un, nil
}

// setState records a state and hands it to every watcher, replacing an
// unread older one. Called with u.mu held.
func (u *Units) setState(un *unit, st member.UnitState) {
	un.state = st
	for _, w := range un.watchers {
		select {
		case <-w:
		default:
		}
		w <- st
	}
}

// StartUnit starts the service unless it runs; a failed start leaves the
// unit "failed" and returns member.ErrUnitJob. As systemd's start job, the
// service's start goes on when ctx ends: only the wait for it ends.
func (u *Units) StartUnit(ctx context.Context, name string) error {
	un, err := u.get("start", name)
	if err != nil {
		return err
	}
	return u.start(ctx, name, un)
}

func (u *Units) start(ctx context.Context, name string, un *unit) error {
	u.mu.Lock()
	if un.state.Running() {
		u.mu.Unlock()
		return nil
	}
	un.gen++
	gen := un.gen
	u.setState(un, member.UnitState{Active: "activating", Sub: "start"})
	u.mu.Unlock()

	job := make(chan error, 1)
	go func() { job <- u.runJob(name, un, gen) }()
	select {
	case err := <-job:
		return err
	case <-ctx.Done():
		return fmt.Errorf("systemdtest: start %s: %w", name, ctx.Err())
	}
}

// runJob starts the service of un's start gen and follows it until it
// exits.
func (u *Units) runJob(name string, un *unit, gen int) error {
	if err := un.svc.Start(context.Background()); err != nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		if un.gen != gen { // a stop job replaced this start
			return fmt.Errorf("systemdtest: start %s: %w: result \"canceled\": %w", name, member.ErrUnitJob, err)
		}
		u.logExit(name, un, err)
		u.journal = append(u.journal, entry{at: time.Now(), unit: name, line: fmt.Sprintf("%s: start failed: %v", name, err)})
		u.setState(un, member.UnitState{Active: "failed", Sub: "failed"})
		return fmt.Errorf("systemdtest: start %s: %w: result \"failed\": %w", name, member.ErrUnitJob, err)
	}
	u.mu.Lock()
	if un.gen == gen {
		u.setState(un, member.UnitState{Active: "active", Sub: "running"})
	}
	u.mu.Unlock()
	go func() {
		<-un.svc.Done()
		err := un.svc.Err()
		u.mu.Lock()
		defer u.mu.Unlock()
		if un.gen != gen || !un.state.Running() {
			return // stopped through StopUnit, or started again
		}
		if un.killed == gen && err == nil {
			err = errKilled
		}
		if err != nil {
			u.logExit(name, un, err)
			u.journal = append(u.journal, entry{at: time.Now(), unit: name, line: fmt.Sprintf("%s: exited: %v", name, err)})
			u.setState(un, member.UnitState{Active: "failed", Sub: "failed"})
			return
		}
		u.setState(un, inactive)
	}()
	return nil
}

// errKilled is why a killed service exited.
var errKilled = errors.New("signal: killed")

// KillUnit stops the service of a running or starting unit at once, as
// SIGKILL would end its main process: the unit ends "failed", a pending
// start job fails. The signal is not looked at.
func (u *Units) KillUnit(ctx context.Context, name string, _ syscall.Signal) error {
	un, err := u.get("kill", name)
	if err != nil {
		return err
	}
	u.mu.Lock()
	if un.state.Active != "active" && un.state.Active != "activating" {
		st := un.state
		u.mu.Unlock()
		return fmt.Errorf("systemdtest: kill %s: no main process to kill (%s)", name, st)
	}
	un.killed = un.gen
	u.mu.Unlock()
	if err := un.svc.Stop(ctx); err != nil {
		return fmt.Errorf("systemdtest: kill %s: %w", name, err)
	}
	return nil
}

// logExit journals the service's last words. Called with u.mu held.
func (u *Units) logExit(name string, un *unit, err error) {
	if l, ok := un.svc.(ExitLogger); ok {
		for _, line := range l.ExitLines(err) {
			u.journal = append(u.journal, entry{at: time.Now(), unit: name, line: line})
		}
	}
}

// StopUnit stops the service; stopping an inactive unit succeeds.
func (u *Units) StopUnit(ctx context.Context, name string) error {
	un, err := u.get("stop", name)
	if err != nil {
		return err
	}
	return u.stop(ctx, name, un)
}

func (u *Units) stop(ctx context.Context, name string, un *unit) error {
	u.mu.Lock()
	un.gen++
	u.setState(un, member.UnitState{Active: "deactivating", Sub: "stop-sigterm"})
	u.mu.Unlock()
	err := un.svc.Stop(ctx)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		u.setState(un, member.UnitState{Active: "failed", Sub: "failed"})
		return fmt.Errorf("systemdtest: stop %s: %w: %w", name, member.ErrUnitJob, err)
	}
	u.setState(un, inactive)
	return nil
}

// RestartUnit stops the service if it runs, then starts it.
func (u *Units) RestartUnit(ctx context.Context, name string) error {
	un, err := u.get("restart", name)
	if err != nil {
		return err
	}
	if err := u.stop(ctx, name, un); err != nil {
		return err
	}
	return u.start(ctx, name, un)
}

// UnitState returns the unit's state.
func (u *Units) UnitState(_ context.Context, name string) (member.UnitState, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	un, ok := u.units[name]
	if !ok {
		return member.UnitState{}, fmt.Errorf("systemdtest: state of %s: %w", name, member.ErrNoUnit)
	}
	return un.state, nil
}

// WatchUnit sends the current state, then each change, until ctx ends.
func (u *Units) WatchUnit(ctx context.Context, name string) (<-chan member.UnitState, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	un, ok := u.units[name]
	if !ok {
		return nil, fmt.Errorf("systemdtest: watch %s: %w", name, member.ErrNoUnit)
	}
	in := make(chan member.UnitState, 1)
	in <- un.state
	un.watchers = append(un.watchers, in)
	out := make(chan member.UnitState)
	go func() {
		defer close(out)
		defer u.unwatch(un, in)
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-in:
				select {
				case out <- st:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (u *Units) unwatch(un *unit, w chan member.UnitState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, x := range un.watchers {
		if x == w {
			un.watchers = append(un.watchers[:i], un.watchers[i+1:]...)
			return
		}
	}
}

// Crash makes the unit's service exit by itself with err, as a crash would.
// Only Sleeper services can be crashed.
func (u *Units) Crash(name string, err error) error {
	u.mu.Lock()
	un, ok := u.units[name]
	u.mu.Unlock()
	if !ok {
		return member.ErrNoUnit
	}
	s, ok := un.svc.(*Sleeper)
	if !ok {
		return errors.New("systemdtest: only a Sleeper can be crashed")
	}
	s.exit(err)
	return nil
}

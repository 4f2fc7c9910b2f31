// Package membertest provides an in-memory member.Runtime for tests of code
// that supervises the local etcd member: it runs nothing, records every
// Start, and lets the test inject start failures, crashes and removal.
package membertest

import (
	"context"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/member"
)

// Fake is an in-memory member.Runtime. The zero value is not usable; call
// NewFake.
type Fake struct {
	mu        sync.Mutex
	failStart func(member.Config) error
	starts    []member.Config
	running   bool
	done      chan struct{}
	err       error
}

var _ member.Runtime = (*Fake)(nil)

// NewFake returns an idle Fake.
func NewFake() *Fake {
	done := make(chan struct{})
	close(done)
	return &Fake{done: done}
}

// FailStart makes each later Start call fn first; when fn returns an error,
// that Start fails with it. nil restores plain success.
func (f *Fake) FailStart(fn func(member.Config) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failStart = fn
}

// Start records cfg and "runs" the member, unless ctx has ended, it already
// runs, or an injected failure says otherwise.
func (f *Fake) Start(ctx context.Context, cfg member.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return fmt.Errorf("member: start %s: %w", cfg.Name, member.ErrRunning)
	}
	f.starts = append(f.starts, cfg)
	f.done = make(chan struct{})
	err := ctx.Err()
	if err == nil && f.failStart != nil {
		err = f.failStart(cfg)
	}
	if err != nil {
		f.err = fmt.Errorf("member: start %s: %w", cfg.Name, err)
		close(f.done)
		return f.err
	}
	f.running, f.err = true, nil
	return nil
}

// Stop ends the run, if any, with a nil Err.
func (f *Fake) Stop(context.Context) error {
	f.exit(nil)
	return nil
}

// Crash ends the run, if any, with err as its Err.
func (f *Fake) Crash(err error) { f.exit(err) }

// Remove ends the run, if any, as if the cluster removed the member.
func (f *Fake) Remove() { f.exit(member.ErrRemoved) }

func (f *Fake) exit(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running {
		return
	}
	f.running, f.err = false, err
	close(f.done)
}

// Done is closed when the latest run has ended.
func (f *Fake) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// Err says why the latest run ended; nil while it runs.
func (f *Fake) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return nil
	}
	return f.err
}

// Running reports whether a run is in progress.
func (f *Fake) Running() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}

// Starts returns the configs of every Start call so far, failed ones included.
func (f *Fake) Starts() []member.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]member.Config(nil), f.starts...)
}

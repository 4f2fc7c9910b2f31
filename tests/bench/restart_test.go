package bench

import (
	"context"
	"sync"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/member"
)

// restarting is a member runtime that can restart its member in place, as
// switch-to-configuration restarts etcd.service when the unit changed; the
// agent does not see the restart as a crash.
type restarting struct {
	member.Runtime
	mu      sync.Mutex
	cfg     member.Config
	done    chan struct{}
	pausing bool
	resumed chan struct{}
}

func newRestarting(rt member.Runtime) *restarting {
	d := make(chan struct{})
	close(d)
	return &restarting{Runtime: rt, done: d}
}

// Start implements member.Runtime.
func (r *restarting) Start(ctx context.Context, cfg member.Config) error {
	if err := r.Runtime.Start(ctx, cfg); err != nil {
		return err
	}
	r.mu.Lock()
	r.cfg = cfg
	r.done = make(chan struct{})
	done := r.done
	r.mu.Unlock()
	go r.watch(done)
	return nil
}

// watch closes done when the member exits other than by a restart.
func (r *restarting) watch(done chan struct{}) {
	for {
		<-r.Runtime.Done()
		r.mu.Lock()
		if !r.pausing {
			r.mu.Unlock()
			close(done)
			return
		}
		resumed := r.resumed
		r.mu.Unlock()
		<-resumed
	}
}

// Done implements member.Runtime.
func (r *restarting) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// restart stops and starts the member with the configuration it ran with.
func (r *restarting) restart(ctx context.Context) error {
	r.mu.Lock()
	r.pausing, r.resumed = true, make(chan struct{})
	cfg := r.cfg
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.pausing = false
		close(r.resumed)
		r.mu.Unlock()
	}()
	if err := r.Runtime.Stop(ctx); err != nil {
		return err
	}
	cfg.ClusterState = member.StateExisting
	return r.Runtime.Start(ctx, cfg)
}

// restartApplier restarts the local member, then applies with next (whose
// health gate waits for the member to serve again).
type restartApplier struct {
	rt   *restarting
	next apply.Applier
}

func (a restartApplier) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	if err := a.rt.restart(ctx); err != nil {
		return apply.Result{}, err
	}
	return a.next.Apply(ctx, gen)
}

func (a restartApplier) Current(ctx context.Context) (string, error) { return a.next.Current(ctx) }

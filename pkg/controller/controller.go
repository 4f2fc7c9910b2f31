package controller

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Controller is one level-triggered reconcile loop, run by a Runtime.
type Controller interface {
	// Name identifies the controller in logs and Health; it is unique
	// within a Runtime.
	Name() string
	// Watches lists the directories and keys the controller reads,
	// relative to the store's prefix: an entry ending in "/" names a
	// directory and every key under it (store.NodesDir), any other entry
	// that one key (store.ActiveOpKey, store.NixosConfigKey("cp-1"), which
	// is not "cp-10"'s). Each change to one of them triggers a
	// reconcile. The whole keyspace ("") is
	// refused: a controller watches its own inputs only. None (nil) makes
	// a tick-only controller, whose inputs have no watch (files, the
	// clock, a process): it must have a resync interval (Resyncer), and it
	// neither reads the store's revision nor watches.
	Watches() []string
	// Reconcile re-reads every input and converges on them. It must not
	// depend on what changed (events are coalesced and never handed over)
	// and should write nothing when nothing changed. An error is retried
	// after a backoff.
	Reconcile(ctx context.Context) error
}

// Resyncer is implemented by controllers that also reconcile on a fixed
// interval, for inputs that have no watch (etcd's member list, gossip).
type Resyncer interface {
	// ResyncInterval is the period of the resync tick; zero or less: none.
	ResyncInterval() time.Duration
}

// Waker is implemented by controllers with an input outside the store
// that can tell when it changed (a process that exited, a request from
// another part of the program): each receive from Wakes triggers a
// reconcile, coalesced with the others. The reconcile still re-reads the
// input; what was received is not handed over.
type Waker interface {
	// Wakes is read once per start of the controller; nil: none.
	Wakes() <-chan struct{}
}

// Settler is implemented by controllers that need not answer a change at
// once (status, maintenance, the slower loops of the leader): after a
// store event or a wake they let further ones gather for SettleDelay
// before the reconcile, so a burst of writes (a join makes a dozen within
// tens of milliseconds) costs one reconcile after it, not reconciles that
// compete with it for the store. The first reconcile, resync ticks and
// retries are not delayed.
type Settler interface {
	// SettleDelay is how long events gather; zero or less: none.
	SettleDelay() time.Duration
}

// Policied is implemented by controllers whose health rule is not the
// runtime's (WithHealthPolicy): one whose reconcile may rightly run for
// long (applying a NixOS generation) must not count as stalled.
type Policied interface {
	// HealthPolicy returns the controller's rule; its zero fields take
	// the runtime's.
	HealthPolicy() HealthPolicy
}

// HealthPolicy says when a running controller stops counting as healthy.
type HealthPolicy struct {
	// MaxFailures is how many failed reconciles in a row make it
	// unhealthy; zero: the runtime's.
	MaxFailures int
	// StallAfter is how long a reconcile may run before it counts as
	// stalled; zero: the runtime's; negative: never.
	StallAfter time.Duration
}

// Source is what the runtime reads from the store: watches and the current
// revision. The store's client (store.Store.Client, already scoped to the
// store's prefix) is one; tests wrap it to inject faults.
type Source interface {
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
}

// Func is a Controller made of its parts, for controllers that are one
// function over some state.
type Func struct {
	// ControllerName is returned by Name.
	ControllerName string
	// Prefixes is returned by Watches.
	Prefixes []string
	// Resync is returned by ResyncInterval.
	Resync time.Duration
	// Policy is returned by HealthPolicy.
	Policy HealthPolicy
	// Wake is returned by Wakes.
	Wake <-chan struct{}
	// Settle is returned by SettleDelay.
	Settle time.Duration
	// Do is called by Reconcile.
	Do func(ctx context.Context) error
}

// Name implements Controller.
func (f *Func) Name() string { return f.ControllerName }

// Watches implements Controller.
func (f *Func) Watches() []string { return f.Prefixes }

// ResyncInterval implements Resyncer.
func (f *Func) ResyncInterval() time.Duration { return f.Resync }

// Wakes implements Waker.
func (f *Func) Wakes() <-chan struct{} { return f.Wake }

// SettleDelay implements Settler.
func (f *Func) SettleDelay() time.Duration { return f.Settle }

// HealthPolicy implements Policied.
func (f *Func) HealthPolicy() HealthPolicy { return f.Policy }

// Reconcile implements Controller.
func (f *Func) Reconcile(ctx context.Context) error { return f.Do(ctx) }

package fleetkit

import (
	"context"
	"sync"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/coordinator/coordinatortest"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Coord is one coordinator candidate of the fleet, on its own client.
type Coord struct {
	Name string
	C    *coordinator.Coordinator
	Cli  *clientv3.Client
	// Store is the candidate's store over Cli (store.New scopes Cli
	// itself: never make a second store of Cli).
	Store *store.Store
	// Steps receives the membership steps it plans (dropped when full).
	Steps chan membership.Step
	// Observer is the candidate's Config.Observer. Its OnMembershipStep
	// feeds Steps; an option may replace that, or set the others (a test
	// that crashes the leader at a point cuts it in the function).
	Observer *coordinatortest.Observer
	// Cancel ends its Run; Done receives what Run returned.
	Cancel context.CancelFunc
	Done   chan error

	stopOnce sync.Once
}

// StartCoordinator runs a candidate with its own client (the coordinator
// identity) of the fleet's members; opts adjust it before it runs.
func (f *Fleet) StartCoordinator(name string, opts ...func(*Coord)) *Coord {
	f.TB.Helper()
	cli := etcdtest.Dial(f.TB, pki.CoordinatorIdentity, time.Second, f.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		f.TB.Fatal(err)
	}
	c := &Coord{Name: name, Cli: cli, Store: st, Done: make(chan error, 1), Steps: make(chan membership.Step, 1000)}
	c.Observer = &coordinatortest.Observer{OnMembershipStep: func(s membership.Step) {
		select {
		case c.Steps <- s:
		default:
		}
	}}
	ttl := f.CoordSession
	if ttl == 0 {
		ttl = CoordSession
	}
	health := f.HealthTimeout
	if health == 0 {
		health = HealthTimeout
	}
	c.C = coordinator.New(coordinator.Config{Name: name, SessionTTL: ttl, Policy: f.Policy, ResyncInterval: CoordResync, HealthTimeout: health, Gossip: f.Gossip, Settle: coordinator.DefaultSettle, Observer: c.Observer}, st, f.Log.With("test-coord", name))
	for _, o := range opts {
		o(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Cancel = cancel
	go func() { c.Done <- c.C.Run(ctx) }()
	f.mu.Lock()
	f.coords[name] = c
	f.mu.Unlock()
	return c
}

// Stop ends the candidate (it resigns) and closes its client; once.
func (c *Coord) Stop() {
	c.stopOnce.Do(func() {
		c.Cancel()
		<-c.Done
		c.Cli.Close()
	})
}

// Cut drops the candidate's connection to etcd at once, as its process
// dying would: every call it makes from then on fails, and its session
// lease is left to expire. It closes the connection, not the client,
// whose fields the candidate's running watches still read; a function of
// its Observer may call it. Stop ends the candidate after.
func (c *Coord) Cut() {
	c.Cli.ActiveConnection().Close()
}

// Crash kills the candidate without resigning: its connection drops, and
// its session lease is left to expire.
func (c *Coord) Crash() {
	c.Cut()
	c.Stop()
}

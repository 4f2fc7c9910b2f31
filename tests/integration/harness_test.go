// Package integration runs nico's agents and coordinators in one test
// process against real etcd members (the etcd binaries as the agents'
// children, and embedded), on loopback.
package integration

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/tests/fleetkit"
)

// fleet is the shared harness (tests/fleetkit) with the test it runs in.
type fleet struct {
	*fleetkit.Fleet
	t *testing.T
}

// node and coord are the harness's agents and candidates.
type (
	node  = fleetkit.Node
	coord = fleetkit.Coord
)

// newFleet makes an empty fleet that logs to t and checks every
// control-plane agent's READY (fleetkit.Fleet.CheckReady). Each agent
// runs its member as the newest etcd binary (binaryRuntime).
func newFleet(t *testing.T) *fleet {
	f := fleetkit.New(t)
	f.Log = testLogger(t)
	f.CheckReady = true
	f.NewRuntime = binaryRuntime(t)
	return &fleet{Fleet: f, t: t}
}

// binaryRuntime makes members run as the newest of the etcd binaries
// (etcdtest.Binaries: make test requires them), each a child process of
// its agent, as a NixOS host runs etcd.service beside the agent. The
// package's tests are about the agents and the coordinators: etcd in its
// own process keeps it out of the race detector, which costs the package
// a third of its CPU time when every member is embedded. The embedded
// runtime runs the whole flow in TestMemberRuntimes, and the tests whose
// subject it is pin it (fleetkit.EmbeddedRuntime).
func binaryRuntime(t *testing.T) func() member.Runtime {
	bins := etcdtest.Binaries(t)
	newest := bins[len(bins)-1].Path
	return func() member.Runtime { return fleetkit.ExecRuntime(newest) }
}

// gated wraps a runtime so that Start waits until open is closed.
type gated struct {
	member.Runtime
	open chan struct{}
}

func (g *gated) Start(ctx context.Context, cfg member.Config) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Runtime.Start(ctx, cfg)
}

// failing wraps a runtime so that Start fails while fail holds.
type failing struct {
	member.Runtime
	fail   atomic.Bool
	starts atomic.Int32
}

func (r *failing) Start(ctx context.Context, cfg member.Config) error {
	r.starts.Add(1)
	if r.fail.Load() {
		return errors.New("simulated: member cannot start")
	}
	return r.Runtime.Start(ctx, cfg)
}

// testLogger logs to t.
func testLogger(t *testing.T) *slog.Logger { return logging.Test(t) }

// waitObj is fleetkit.WaitObj on the test's fleet.
func waitObj[T any, PT interface {
	*T
	api.Object
}](f *fleet, within time.Duration, key string, what string, cond func(PT) bool) PT {
	f.t.Helper()
	return fleetkit.WaitObj[T, PT](f.Fleet, within, key, what, cond)
}

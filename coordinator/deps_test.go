package coordinator

import (
	"time"

	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// heldClock is a Config.Clock whose time is *now, which the test moves
// by hand; its timers and tickers are the real clock's.
type heldClock struct {
	clockwork.Clock
	now *time.Time
}

// clockAt returns the heldClock of *now.
func clockAt(now *time.Time) heldClock { return heldClock{Clock: clockwork.NewRealClock(), now: now} }

func (c heldClock) Now() time.Time                  { return *c.now }
func (c heldClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c heldClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// withClock is a leaderTerm option: the candidate's clock is clk.
func withClock(clk clockwork.Clock) func(*Config) {
	return func(cfg *Config) { cfg.Clock = clk }
}

// testMembershipDeps are the membership controller's dependencies c
// would build in the term fenced on fence (controllers.go).
func testMembershipDeps(c *Coordinator, fence store.Fence) membershipDeps {
	d := c.leaderDeps(fence)
	return c.membershipDeps(d, c.snapshotter(d))
}

package integration

import (
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
)

// inProcess lets one fleet of in-process members run at a time.
var inProcess sync.Mutex

// newInProcessFleet makes a fleet whose members run in the test's own
// process (the embedded runtime), for the tests that run the whole flow on
// it beside the etcd binaries. Under the race detector, beside the other
// tests' fleets, such members answer late: on a loaded 2-core machine
// raft heartbeats came 740 ms late, a status call took over a second and
// a learner served 20 s after it was added. So one such fleet runs at a
// time, and its timings are a deployment's rather than the fleets' short
// ones: a 100 ms raft tick and a 2 s election timeout (not 50 ms and
// 500 ms, with which the members elected a leader again and again), the
// coordinator's default session of 10 s (its single candidate waits on no
// session's expiry), 5 s for a member's status (1 s found live members
// unhealthy and refused a safe removal), a minute for a learner to start
// and to make progress, and three minutes for Grow's joins.
func newInProcessFleet(t *testing.T) *fleet {
	inProcess.Lock()
	t.Cleanup(inProcess.Unlock) // after the fleet's members stop
	f := newFleet(t)
	f.NewRuntime = func() member.Runtime {
		return member.NewEmbedded(member.WithTimings(100*time.Millisecond, 2*time.Second))
	}
	f.CoordSession = 10 * time.Second
	f.HealthTimeout = 5 * time.Second
	f.Policy.LearnerStartTimeout, f.Policy.LearnerProgressTimeout = time.Minute, time.Minute
	f.GrowWithin = 3 * time.Minute
	return f
}

// binaryFleet makes a fleet whose members run as the etcd binary at path.
func binaryFleet(path string) func(t *testing.T) *fleet {
	return func(t *testing.T) *fleet {
		f := newFleet(t)
		f.NewRuntime = func() member.Runtime { return member.NewExec(path) }
		return f
	}
}

// runtimeFleets names a fleet maker for each member runtime: the embedded
// one ("embedded") and the etcd binary of each available minor version
// ("etcd-3.6", ...).
func runtimeFleets(t *testing.T) map[string]func(*testing.T) *fleet {
	fleets := map[string]func(*testing.T) *fleet{"embedded": newInProcessFleet}
	for _, bin := range etcdtest.Binaries(t) {
		fleets["etcd-"+bin.Version] = binaryFleet(bin.Path)
	}
	return fleets
}

package integration

import (
	"time"

	"github.com/homystack/nico/pkg/member"
)

// embeddedCoordSession is the coordinator's session TTL in fleets whose
// members run in the test's own process (embeddedRuntime), under the race
// detector beside the other tests' fleets: their raft heartbeats were
// seen 740 ms late on a loaded machine, and the fleets' 2 s session
// expired again and again while a join or a removal waited on the
// leader. These tests run one candidate, so nothing waits on its session
// to expire; it is nico-coordinator's default.
const embeddedCoordSession = 10 * time.Second

// embeddedRuntime is the embedded runtime of the tests that run it beside
// the etcd binaries: members in the test's own process, under the race
// detector, with a 100 ms raft tick and a 2 s election timeout. With the
// fleets' 50 ms and 500 ms (fleetkit.EmbeddedRuntime), heartbeats that a
// loaded machine delayed by 740 ms made the members elect a leader again
// and again while a join waited on them. The binary variants beside them
// run etcd's own defaults (100 ms, 1 s), outside the race detector.
func embeddedRuntime() member.Runtime {
	return member.NewEmbedded(member.WithTimings(100*time.Millisecond, 2*time.Second))
}

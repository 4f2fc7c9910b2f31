package faults

import (
	"testing"
	"time"
)

// TestMinorityPartition: three voters under a write workload; one voter
// that does not lead etcd is cut off (both directions) while the other two
// acknowledge 50 more writes, then healed; it catches up within 60 s, the
// invariants hold, nothing acknowledged is lost, the history is
// linearizable.
func TestMinorityPartition(t *testing.T) {
	minorityPartitionRun(t, "minority partition (one voter cut off both ways) during writes")
}

// TestMinorityPartitionEmbedded is TestMinorityPartition with the
// members embedded in the agents (the embedded etcd runtime).
func TestMinorityPartitionEmbedded(t *testing.T) {
	requireE2E(t)
	minorityPartitionRun(t, "minority partition"+runtimes[1].label, runtimes[1].opt)
}

func minorityPartitionRun(t *testing.T, name string, opts ...func(*cluster)) {
	s := newScenario(t, name, 3, 3, opts...)
	s.startWorkload(3, 2)
	s.waitWrites(30*time.Second, 100)
	victim := s.follower()
	s.fault(s.c.nodes[victim].name, true)
	s.c.net.cut(victim)
	s.waitWrites(60*time.Second, 50)
	s.c.net.heal()
	healed := time.Now()
	s.waitCaughtUp(60 * time.Second)
	s.fault(s.c.nodes[victim].name, false)
	s.waitWrites(30*time.Second, 100)
	s.finish(time.Since(healed))
}

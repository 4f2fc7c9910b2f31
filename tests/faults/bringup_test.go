package faults

import (
	"testing"
	"time"
)

// TestBringUpWhileWriting: one voter grows to two, then three, while
// clients write throughout; the watcher samples every invariant, among
// them that no voter counts toward quorum that has not answered for
// longer than the health timeout (a learner promoted before its member
// serves is one: with two voters, quorum two, one serving). A smoke
// scenario.
func TestBringUpWhileWriting(t *testing.T) {
	s := newScenario(t, "bring-up from one voter to three while clients write", 3, 1)
	s.startWorkload(3, 30)
	s.waitWrites(30*time.Second, 300) // a log past etcd's first snapshot: the joiners get one
	start := time.Now()
	s.c.startAgent(1)
	s.c.waitVoters(s.cli, 120*time.Second, "cp-1", "cp-2")
	s.waitWrites(30*time.Second, 100)
	s.c.startAgent(2)
	s.c.waitVoters(s.cli, 120*time.Second, "cp-1", "cp-2", "cp-3")
	s.waitCaughtUp(60 * time.Second)
	took := time.Since(start)
	s.waitWrites(30*time.Second, 100)
	s.finish(took)
}

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/tests/fleetkit"
)

// snapshotJoinEntries is how many writes the cluster takes before the join:
// more than etcd's 5 000-entry gap between committed and applied at which a
// member refuses its own publish ("too many requests"), so the learner gets
// its log as a snapshot and its applied index stays behind (see
// docs/etcd-snapshot-join.md).
const snapshotJoinEntries = 5200

// snapshotJoinBound is how long the learner may take from its agent's start
// to being a published voter: stuck (a planner that waits for the learner
// to start before promoting, while it never starts), it never gets there.
// The bound tells stuck from slow on a loaded machine; it is not a measure
// of join speed (tests/bench measures that).
const snapshotJoinBound = 90 * time.Second

// TestJoinIntoSnapshottedLog joins a learner into a cluster with more than
// 5 000 committed entries and no client writing, on the embedded runtime and
// on each etcd binary; each becomes a voter within snapshotJoinBound.
func TestJoinIntoSnapshottedLog(t *testing.T) {
	t.Parallel()
	for name, makeFleet := range runtimeFleets(t) {
		t.Run(name, func(t *testing.T) {
			f := makeFleet(t)
			// The learner receives and applies a snapshot of tens of
			// megabytes: it may take as long as the bound to answer, which
			// the fleet's short learner timeouts would abort.
			f.Policy.LearnerStartTimeout, f.Policy.LearnerProgressTimeout = snapshotJoinBound, snapshotJoinBound
			f.Start(f.AgentConfig("cp-1", true))
			f.WaitVoters(30*time.Second, "cp-1")
			f.StartCoordinator("c-1")
			fillLog(t, f, snapshotJoinEntries)
			// Idle from here: nobody writes but nico itself.
			start := time.Now()
			f.Start(f.AgentConfig("cp-2", false))
			f.WaitVoters(snapshotJoinBound, "cp-1", "cp-2")
			t.Logf("%s: join into %d entries -> voter in %s", name, snapshotJoinEntries, time.Since(start).Round(time.Millisecond))
		})
	}
}

// fillLog makes n raft entries: n single-key puts, a few at a time.
func fillLog(t *testing.T, f *fleet, n int) {
	t.Helper()
	err := fleetkit.Fill(t.Context(), f.Client(), 16, n, func(i int) (string, string) { return fmt.Sprintf("/user/fill/%05d", i), fillValue })
	if err != nil {
		t.Fatalf("fill the log: %v", err)
	}
}

// fillValue makes the snapshot big enough to take a while to send.
var fillValue = string(make([]byte, 12<<10))

package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
)

// snapshotHistory is how many writes the cluster takes before the joins:
// past etcd's first in-memory snapshot at 100 raft entries, so every
// learner is sent a snapshot instead of the log (docs/etcd-snapshot-join.md).
const snapshotHistory = 200

// snapshotJoins is how many learners join one after the other; a learner
// sent a snapshot often finds its own first publish inside it.
const snapshotJoins = 10

// snapshotServeBound is how long a learner may take from its Start to
// serving. A learner that lost its publish to the snapshot and waited for
// it would serve only after etcd's request timeout: 5 s plus two election
// timeouts, 6 s with the test timings. Learners that lost nothing took up
// to 4.1 s on a busy 2-core machine (the Systemd runtime over a real
// systemd: a unit's start, its notify, the runtime's polls), so the bound
// sits between the two.
const snapshotServeBound = 5 * time.Second

// snapshotRuntime is one runtime TestSnapshottedLearnerServesPromptly runs.
type snapshotRuntime struct {
	name  string
	new   func() member.Runtime
	bound time.Duration
}

// TestSnapshottedLearnerServesPromptly joins learners one after the other
// into a cluster whose raft log is compacted; each serves within
// snapshotServeBound of its Start.
func TestSnapshottedLearnerServesPromptly(t *testing.T) {
	t.Parallel()
	rts := []snapshotRuntime{
		{"embedded", func() member.Runtime { return member.NewEmbedded(member.WithTimings(testTick, testElection)) }, snapshotServeBound},
		// etcd.service runs a member that waits out a lost publish, as
		// etcd alone does: the Systemd runtime restarts the unit.
		{"systemd", func() member.Runtime { return newSystemdFixture(t, member.WithoutPublishRestart()).rt }, snapshotServeBound},
	}
	for _, bin := range etcdtest.Binaries(t) {
		rts = append(rts, snapshotRuntime{"etcd-" + bin.Version, func() member.Runtime {
			return member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
		}, snapshotServeBound})
	}
	for _, rt := range rts {
		t.Run(rt.name, func(t *testing.T) { testSnapshottedJoins(t, rt.new, rt.new, rt.bound, 0) })
	}
}

// testSnapshottedJoins runs the first member on newLeader's runtime and
// each learner on a runtime of newLearner's; it fails when more than
// allowedSlow learners take longer than bound to serve.
func testSnapshottedJoins(t *testing.T, newLeader, newLearner func() member.Runtime, bound time.Duration, allowedSlow int) {
	ctx := caseContext(t)
	a := newLeader()
	stopAll(t, a)
	cfgA := newConfig(t, "a")
	if err := a.Start(ctx, cfgA); err != nil {
		t.Fatalf("start a: %v", err)
	}
	cli := etcdtest.NewClient(t, cfgA.ClientURL)
	for i := range snapshotHistory {
		if _, err := cli.Put(ctx, "/history", fmt.Sprint(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	var slow int
	for i := range snapshotJoins {
		name := fmt.Sprintf("l%d", i)
		cfg := newConfig(t, name)
		added := memberAddAsLearner(ctx, t, cli, cfg.PeerURL)
		cfg.InitialCluster = initialCluster(added, name)
		cfg.ClusterState = member.StateExisting
		cfg.ClusterToken = cfgA.ClusterToken
		l := newLearner()
		start := time.Now()
		if err := l.Start(ctx, cfg); err != nil {
			t.Fatalf("start learner %s: %v", name, err)
		}
		took := time.Since(start)
		t.Logf("learner %s serves %s after its start", name, took.Round(time.Millisecond))
		if took > bound {
			slow++
		}
		retry(ctx, t, "MemberRemove", func() error { _, err := cli.MemberRemove(ctx, added.Member.ID); return err })
		waitDone(ctx, t, l)
		if err := l.Stop(ctx); err != nil {
			t.Fatalf("stop learner %s: %v", name, err)
		}
	}
	if slow > allowedSlow {
		t.Fatalf("%d of %d learners took more than %s to serve", slow, snapshotJoins, bound)
	}
}

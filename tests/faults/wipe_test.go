package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// wipeRun: three voters under a write workload; node i's agent and etcd
// are killed (-9), its etcd data dir (<dataDir>/etcd) removed, and the
// agent started again with the same flags. The node must come back
// through the learner path (a join journaled with its learner added, a
// new member ID) within 120 s and never answer as another cluster (a
// fresh single-member one).
func wipeRun(t *testing.T, i int) {
	s := newScenario(t, fmt.Sprintf("a voter's data dir wiped (%s), agent restarted", map[bool]string{true: "the bootstrap host", false: "a joiner"}[i == 0]), 3, 3)
	c := s.c
	s.startWorkload(3, 12)
	s.waitWrites(30*time.Second, 100)
	name := c.nodes[i].name
	oldID, clusterID := s.memberID(i)
	s.fault(name, true)
	c.killAgent(i)
	if err := os.RemoveAll(c.etcdDir(i)); err != nil {
		t.Fatal(err)
	}
	wiped := time.Now()
	c.startAgent(i)
	restarts := 0
	testwait.For(t, 120*time.Second, name+" back as a voter with a new member ID", func() (bool, string) {
		// A removed node's agent exits 3; its service manager starts it
		// again.
		if ok, code := c.nodes[i].agent.exited(); ok {
			if i == 0 && !c.bootstrapped && code != 0 && strings.Contains(tail(c.nodes[i].agent.log, 20), "bootstrap refused") {
				t.Logf("the bootstrap host refused to bootstrap again; starting it with etcd.endpoints set")
				c.bootstrapped = true
				c.killAgent(i)
				c.startAgent(i)
				return false, "restarted as a joiner"
			}
			if code != 3 || restarts > 2 {
				t.Fatalf("%s's agent exited %d (restarted %d times):\n%s", name, code, restarts, tail(c.nodes[i].agent.log, 10))
			}
			restarts++
			t.Logf("%s's agent exited 3 (removed); starting it again", name)
			c.killAgent(i)
			c.startAgent(i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := s.cli.Status(ctx, c.clientURL(i))
		cancel()
		if err == nil && st.Header.ClusterId != clusterID {
			t.Fatalf("%s answers as cluster %x, not %x: it started a new cluster", name, st.Header.ClusterId, clusterID)
		}
		// A fresh single-member cluster of the same name, peer URL and
		// token has the old IDs: it shows as a second leader.
		if err == nil && st.Leader == st.Header.MemberId {
			other := (i + 1) % len(c.nodes)
			octx, ocancel := context.WithTimeout(context.Background(), time.Second)
			ost, oerr := s.cli.Status(octx, c.clientURL(other))
			ocancel()
			if oerr == nil && ost.Leader != 0 && ost.Leader != st.Leader {
				t.Fatalf("%s leads by itself while %s follows %x: it started a new single-member cluster", name, c.nodes[other].name, ost.Leader)
			}
		}
		id, _ := s.memberID(i)
		return id != 0 && id != oldID && s.memberState(i) == "voter", fmt.Sprintf("member %x (was %x), %s", id, oldID, s.memberState(i))
	})
	took := time.Since(wiped)
	if !s.joinedAsLearner(name, wiped) {
		s.logJournal(api.OpJoin)
		t.Errorf("no join of %s since the wipe journals a learner added", name)
	}
	s.waitCaughtUp(60 * time.Second)
	s.fault(name, false)
	s.waitWrites(30*time.Second, 50)
	s.finish(took)
}

// TestWipedVoterRejoins wipes a joiner's and the bootstrap host's member
// data.
// data. The agent finds its member lost, files its removal and exits 3
// once removed (the harness starts it again, as its service manager
// does); then it joins anew. The bootstrap host refuses to bootstrap
// again (its endpoints cache names the cluster) and is started again with
// etcd.endpoints set, as its operator would.
func TestWipedVoterRejoins(t *testing.T) {
	requireE2E(t)
	t.Run("joiner", func(t *testing.T) { wipeRun(t, 1) })
	t.Run("bootstrap-host", func(t *testing.T) { wipeRun(t, 0) })
}

// etcdDir is node i's etcd data dir (etcd.dataDir's default).
func (c *cluster) etcdDir(i int) string { return filepath.Join(c.dir, c.nodes[i].name, "etcd") }

// memberID is node i's member ID (found by peer URL; 0 when absent) and
// the cluster ID.
func (s *scenario) memberID(i int) (id, cluster uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.cli.MemberList(ctx)
	if err != nil {
		return 0, 0
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, s.c.peerURL(i)) {
			return m.ID, resp.Header.ClusterId
		}
	}
	return 0, resp.Header.ClusterId
}

// joinedAsLearner tells whether a join of node created after since
// journaled its learner added.
func (s *scenario) joinedAsLearner(node string, since time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops, _, err := store.List[api.Operation](ctx, s.st, store.OpsDir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, op := range ops {
		if op.Spec.Type != api.OpJoin || op.Spec.Node != node || op.Metadata.CreatedAt.Before(since) {
			continue
		}
		for _, e := range op.Status.History {
			if strings.HasPrefix(e.Message, "learner ") && strings.HasSuffix(e.Message, " added") {
				return true
			}
		}
	}
	return false
}

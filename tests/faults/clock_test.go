package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// withClocks gives every node a wall clock the test can step: its agent
// and coordinator read nico's clock through failpoint.Clock, offset by
// the duration in <dir>/<node>.clock (docs/faults.md: what a Linux time
// namespace cannot do).
func (c *cluster) withClocks() {
	c.nodeEnv = func(i int) []string { return []string{failpoint.EnvClockFile + "=" + c.clockFile(i)} }
}

func (c *cluster) clockFile(i int) string { return filepath.Join(c.dir, c.nodes[i].name+".clock") }

// stepClock sets node i's clock to real time + offset and waits until
// every running process of the node reads it (each logs the step).
func (c *cluster) stepClock(i int, offset time.Duration) {
	c.t.Helper()
	if err := os.WriteFile(c.clockFile(i), []byte(offset.String()+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	want := "failpoint clock: stepped to " + offset.String()
	if offset == 0 {
		want = "failpoint clock: stepped to 0s"
	}
	for _, p := range []*proc{c.nodes[i].agent, c.nodes[i].coord} {
		if p == nil {
			continue
		}
		if ok, _ := p.exited(); ok {
			continue
		}
		testwait.True(c.t, 30*time.Second, p.name+" reads its clock "+offset.String(), func() bool {
			b, _ := os.ReadFile(p.log)
			return strings.Contains(string(b), want)
		})
	}
}

// TestClockStepped: nico's wall clock stepped on one node at a time while
// clients write (docs/faults.md, "A node's clock stepped"):
//   - the coordinator leader's node 1 h ahead while a learner has not
//     started (its agent paused before it starts it): the leader's start
//     timeout (2 min, counted from the journal's wall time) runs out at
//     once, the join fails and is retried; four voters within 120 s of
//     the release;
//   - the same node 1 h behind during a rollout: Succeeded within 120 s,
//     each node applying it once; a failing generation halts, not rolled on;
//   - a follower's node 250 days ahead (past two thirds of its
//     certificates' year): it re-issues its certificates from its own
//     clock, valid only from then; its clock back, it re-issues them again
//     (they are not valid yet: pki's "not valid yet" rule) and catches up
//     within 90 s.
//
// The invariants hold throughout.
func TestClockStepped(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "a node's clock stepped (leader ±1 h, a follower +250 days)", 4, 3, (*cluster).withGenerations, (*cluster).withClocks)
	c := s.c
	c.startCoordinator(1)
	c.startCoordinator(2)
	s.waitLeader(10*time.Second, "c-cp-1")
	s.startWorkload(3, 21)
	s.waitWrites(30*time.Second, 100)

	// The leader ahead while cp-4's learner waits to start.
	c.startAgent(3, c.pauseEnv(failpoint.AgentBeforeLearnerStart)...)
	c.waitReached(failpoint.AgentBeforeLearnerStart, 90*time.Second)
	c.stepClock(0, time.Hour)
	aborted := poll(10*time.Second, func() bool { return s.joinFailed("cp-4") })
	t.Logf("leader +1h with cp-4's learner not started: its join failed within 10 s: %v", aborted)
	released := time.Now()
	c.release(failpoint.AgentBeforeLearnerStart)
	c.waitVoters(s.cli, 120*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	joined := time.Since(released)
	t.Logf("leader +1h during a learner's start: four voters %s after the release", joined.Round(time.Millisecond))
	s.waitCaughtUp(60 * time.Second)

	// The leader behind during a rollout.
	c.stepClock(0, -time.Hour)
	from := time.Now()
	s.startRollout("r1", "v1")
	s.waitRollout("r1", 120*time.Second, api.RolloutSucceeded)
	rolled := time.Since(from)
	s.checkAppliedOnce("v1")
	s.badRollout("r2")
	c.stepClock(0, 0)

	// A follower far ahead: its certificates are re-issued in its
	// future (the agent holding ca.key renews every few seconds, else at
	// its start: then it is restarted). Not cp-1, whose candidate leads.
	f := s.follower()
	name := c.nodes[f].name
	_, err := os.Stat(c.pkiDir(f).CAKey())
	holdsCA := err == nil
	s.fault(name, true)
	ahead := 250 * 24 * time.Hour
	c.stepClock(f, ahead)
	if !holdsCA {
		c.killAgent(f)
		c.startAgent(f)
	}
	future := func() bool { return c.peerCertNotBefore(f).After(time.Now().Add(ahead / 2)) }
	testwait.True(t, 60*time.Second, name+"'s peer certificate re-issued in its future", future)
	served := poll(20*time.Second, func() bool { return !s.serves(f) })
	t.Logf("%s %s ahead (holds ca.key: %v): peer certificate from %s; stopped serving the test's client within 20 s: %v",
		name, ahead, holdsCA, c.peerCertNotBefore(f).Format(time.DateOnly), served)
	s.waitWrites(60*time.Second, 30)
	c.stepClock(f, 0)
	back := time.Now()
	if !holdsCA {
		c.killAgent(f)
		c.startAgent(f)
	}
	testwait.True(t, 60*time.Second, name+"'s peer certificate valid again", func() bool { return !c.peerCertNotBefore(f).After(time.Now()) })
	s.waitCaughtUp(90 * time.Second)
	s.fault(name, false)
	healed := time.Since(back)
	t.Logf("join %s, rollout %s, follower back %s", joined.Round(time.Millisecond), rolled.Round(time.Millisecond), healed.Round(time.Millisecond))
	s.finish(max(joined, rolled, healed))
}

// peerCertNotBefore is the NotBefore of node i's etcd peer certificate
// (zero when it cannot be read).
func (c *cluster) peerCertNotBefore(i int) time.Time {
	b, err := os.ReadFile(c.pkiDir(i).Cert(pki.EtcdPeerLeaf))
	if err != nil {
		return time.Time{}
	}
	cert, err := pki.ParseCert(b)
	if err != nil {
		return time.Time{}
	}
	return cert.NotBefore
}

// serves reports whether node i's member answers a status call through
// the test's client (the cluster's certificates).
func (s *scenario) serves(i int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := s.cli.Status(ctx, s.c.clientURL(i))
	return err == nil
}

// joinFailed reports whether a join operation of node failed (its journal
// closed it, to be retried).
func (s *scenario) joinFailed(node string) bool {
	ops, _, err := store.List[api.Operation](s.t.Context(), s.st, store.OpsDir)
	if err != nil {
		return false
	}
	for _, op := range ops {
		if op.Spec.Node == node && op.Spec.Type == api.OpJoin && op.Status.Phase == api.OpFailed {
			return true
		}
	}
	return false
}

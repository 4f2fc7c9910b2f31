package faults

import (
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// TestRolloutMinorityPartition: three voters applying generations under a
// write workload; an etcd follower is cut off (both ways) and a rollout of
// v1 filed. The rollout must not pass the cut node: until the heal, the
// cut node has not applied v1 and the rollout has not succeeded. Healed
// once the rollout waits on the cut node (or after 30 s), it succeeds
// within 120 s of the heal, every node having applied v1 once; then a
// failing generation halts and is not rolled on.
func TestRolloutMinorityPartition(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "minority partition during a rollout", 3, 3, (*cluster).withGenerations)
	c := s.c
	s.startWorkload(3, 13)
	s.waitWrites(30*time.Second, 100)
	victim := s.follower()
	name := c.nodes[victim].name
	s.fault(name, true)
	c.net.cut(victim)
	s.startRollout("r1", "v1")
	waiting := poll(30*time.Second, func() bool {
		r := &api.Rollout{}
		return s.st.Get(t.Context(), store.RolloutKey("r1"), r) == nil && slices.Contains(r.Status.Current, name)
	})
	r := &api.Rollout{}
	if err := s.st.Get(t.Context(), store.RolloutKey("r1"), r); err != nil {
		t.Fatal(err)
	}
	t.Logf("before the heal: rollout %s, step %d, current %v (waiting on %s: %v); v1 applied by %v", r.Status.Phase, r.Status.Step, r.Status.Current, name, waiting, c.applied("v1"))
	if r.Status.Phase == api.RolloutSucceeded || slices.Contains(c.applied("v1"), name) {
		s.w.breach("rollout passed the cut node %s: %s, v1 applied by %v", name, r.Status.Phase, c.applied("v1"))
	}
	c.net.heal()
	healed := time.Now()
	s.waitRollout("r1", 120*time.Second, api.RolloutSucceeded)
	took := time.Since(healed)
	s.waitCaughtUp(60 * time.Second)
	s.fault(name, false)
	s.checkAppliedOnce("v1")
	s.badRollout("r2")
	s.finish(took)
}

package metrics

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/membership"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// programs builds the registries the two programs serve (ForAgent,
// ForCoordinator, as their mains do), for tests that need every name
// either exports.
func programs() (agent, coord *Registry) {
	none := func() []controller.Health { return nil }
	noMesh := func() GossipSource { return nil }
	agent, _ = ForAgent("n", none, noMesh, "")
	coord, _ = ForCoordinator(none, noMesh, "")
	return agent, coord
}

// TestNamesFollowConventions: every nico metric has the nico_ prefix, a
// counter ends in _total, and durations are in seconds.
func TestNamesFollowConventions(t *testing.T) {
	a, c := programs()
	names := append(a.Names(), c.Names()...)
	if !slices.Contains(names, "nico_coordinator_is_leader") || !slices.Contains(names, "go_goroutines") {
		t.Fatalf("names %v lack nico_coordinator_is_leader or go_goroutines", names)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") {
			continue
		}
		if !strings.HasPrefix(n, "nico_") {
			t.Errorf("%s: not nico_", n)
		}
		if strings.Contains(n, "duration") && !strings.HasSuffix(n, "_seconds") {
			t.Errorf("%s: a duration not in seconds", n)
		}
	}
}

// TestMembershipPassCountsAnOperationOnce: the closing step of an
// operation counts its outcome and duration once, even when the planner
// repeats it, and the join-to-voter time comes from the request.
func TestMembershipPassCountsAnOperationOnce(t *testing.T) {
	reg := NewRegistry()
	c := NewCoordinator(reg)
	t0 := time.Unix(1000, 0)
	op := api.NewOperation("op-1")
	op.Metadata.CreatedAt = t0.Add(10 * time.Second)
	op.Spec.Type = api.OpJoin
	j := &api.JoinRequest{Metadata: api.ObjectMeta{Name: "cp-2", CreatedAt: t0}}
	obs := membership.Observed{
		Members: []membership.Member{
			{ID: 1, Name: "cp-1", Node: "cp-1", Healthy: true, Leader: true, RaftIndex: 100},
			{ID: 2, Name: "cp-2", Node: "cp-2", Learner: true, Healthy: true, RaftIndex: 50},
		},
		Nodes: []*api.Node{{Metadata: api.ObjectMeta{Name: "cp-1"}}, {Metadata: api.ObjectMeta{Name: "cp-2"}}},
		Alive: map[string]bool{"cp-1": true},
		Joins: []*api.JoinRequest{j},
	}
	c.MembershipPass(obs, nil, t0.Add(20*time.Second))
	c.MembershipStep(membership.Step{Action: membership.Promote, Op: op}, nil)
	if got := testutil.ToFloat64(c.learner.WithLabelValues("cp-2")); got != 0.5 {
		t.Errorf("learner progress %v, want 0.5", got)
	}
	if got := testutil.ToFloat64(c.nodeLiveness.WithLabelValues("cp-2", "dead")); got != 1 {
		t.Errorf("cp-2 (lease gone) liveness dead = %v, want 1", got)
	}
	c.MembershipPass(obs, nil, t0.Add(30*time.Second))
	c.MembershipStep(membership.Step{Action: membership.FinishJoin, Op: op, Request: "cp-2"}, errors.New("not written"))
	if got := testutil.ToFloat64(c.ops.WithLabelValues("Join", "succeeded")); got != 0 {
		t.Errorf("a closing step that was not written counted: %v", got)
	}
	for range 2 {
		c.MembershipPass(obs, nil, t0.Add(30*time.Second))
		c.MembershipStep(membership.Step{Action: membership.FinishJoin, Op: op, Request: "cp-2"}, nil)
	}
	if got := testutil.ToFloat64(c.ops.WithLabelValues("Join", "succeeded")); got != 1 {
		t.Errorf("joins succeeded %v, want 1", got)
	}
	if n := testutil.CollectAndCount(c.joinToVoter); n != 1 {
		t.Errorf("join-to-voter series %d, want 1", n)
	}
	if err := testutil.CollectAndCompare(c.joinToVoter, strings.NewReader(`
# HELP nico_membership_join_to_voter_seconds From a join request's creation to its member being a voter.
# TYPE nico_membership_join_to_voter_seconds histogram
nico_membership_join_to_voter_seconds_bucket{le="0.1"} 0
nico_membership_join_to_voter_seconds_bucket{le="0.25"} 0
nico_membership_join_to_voter_seconds_bucket{le="0.5"} 0
nico_membership_join_to_voter_seconds_bucket{le="1"} 0
nico_membership_join_to_voter_seconds_bucket{le="2.5"} 0
nico_membership_join_to_voter_seconds_bucket{le="5"} 0
nico_membership_join_to_voter_seconds_bucket{le="10"} 0
nico_membership_join_to_voter_seconds_bucket{le="30"} 1
nico_membership_join_to_voter_seconds_bucket{le="60"} 1
nico_membership_join_to_voter_seconds_bucket{le="120"} 1
nico_membership_join_to_voter_seconds_bucket{le="300"} 1
nico_membership_join_to_voter_seconds_bucket{le="600"} 1
nico_membership_join_to_voter_seconds_bucket{le="1800"} 1
nico_membership_join_to_voter_seconds_bucket{le="3600"} 1
nico_membership_join_to_voter_seconds_bucket{le="+Inf"} 1
nico_membership_join_to_voter_seconds_sum 30
nico_membership_join_to_voter_seconds_count 1
`)); err != nil {
		t.Error(err)
	}
}

// TestMembershipPassDropsSeriesThatWentAway: a learner promoted loses its
// progress series, a node whose state changed keeps only the new state's,
// and a removed node has none.
func TestMembershipPassDropsSeriesThatWentAway(t *testing.T) {
	c := NewCoordinator(NewRegistry())
	now := time.Unix(1000, 0)
	nodes := []*api.Node{{Metadata: api.ObjectMeta{Name: "cp-1"}}, {Metadata: api.ObjectMeta{Name: "cp-2"}}}
	obs := membership.Observed{
		Members: []membership.Member{{ID: 1, Node: "cp-1", Leader: true, Healthy: true, RaftIndex: 10}, {ID: 2, Node: "cp-2", Learner: true, RaftIndex: 10}},
		Nodes:   nodes, Alive: map[string]bool{"cp-1": true, "cp-2": true},
	}
	c.MembershipPass(obs, nil, now)
	if n := testutil.CollectAndCount(c.learner); n != 1 {
		t.Fatalf("learner series %d, want 1", n)
	}
	obs.Members[1].Learner = false
	obs.Nodes = nodes[:1]
	c.MembershipPass(obs, map[string]membership.Liveness{"cp-1": {State: membership.LiveSuspect}}, now)
	if n := testutil.CollectAndCount(c.learner); n != 0 {
		t.Errorf("learner series %d after promotion, want 0", n)
	}
	if n := testutil.CollectAndCount(c.nodeLiveness); n != 1 {
		t.Errorf("liveness series %d, want 1 (cp-1 suspect)", n)
	}
	if got := testutil.ToFloat64(c.nodeLiveness.WithLabelValues("cp-1", "suspect")); got != 1 {
		t.Errorf("cp-1 suspect = %v, want 1", got)
	}
	if got := testutil.ToFloat64(c.tolerance); got != -1 {
		t.Errorf("fault tolerance of 2 voters, one unhealthy = %v, want -1 (quorum lost)", got)
	}
}

// TestFollowerDropsWhatItLastSaw: a candidate that stops leading exports
// no member, node or rollout series and no operation in flight; leading
// again, its next pass sets them anew.
func TestFollowerDropsWhatItLastSaw(t *testing.T) {
	c := NewCoordinator(NewRegistry())
	now := time.Unix(1000, 0)
	obs := membership.Observed{
		Members: []membership.Member{{ID: 1, Node: "cp-1", Leader: true, Healthy: true, RaftIndex: 10}, {ID: 2, Node: "cp-2", Learner: true, RaftIndex: 5}},
		Nodes:   []*api.Node{{Metadata: api.ObjectMeta{Name: "cp-1"}}}, Alive: map[string]bool{"cp-1": true},
	}
	c.Leading(true)
	c.MembershipPass(obs, nil, now)
	ro := api.NewRollout("r1")
	ro.Status.Phase = api.RolloutHalted
	c.RolloutStep(ro, now)
	c.inFlight.Set(1)
	c.Leading(false)
	for name, v := range map[string]*prometheus.GaugeVec{"learner": c.learner, "member voter": c.memberVoter, "members": c.members, "nodes": c.nodes, "liveness": c.nodeLiveness, "rollout progress": c.rollProgress, "rollout halted": c.rollHalted} {
		if n := testutil.CollectAndCount(v); n != 0 {
			t.Errorf("%s: %d series after leadership ended, want 0", name, n)
		}
	}
	if got := testutil.ToFloat64(c.inFlight); got != 0 {
		t.Errorf("in flight %v on a follower, want 0", got)
	}
	c.Leading(true)
	c.MembershipPass(obs, nil, now)
	if n := testutil.CollectAndCount(c.learner); n != 1 {
		t.Errorf("learner series %d once leading again, want 1", n)
	}
}

package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/prometheus/client_golang/prometheus"
)

// durationBuckets are the buckets of operation and step durations, in
// seconds: from a tenth of a second to an hour.
var durationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Coordinator holds the metrics of one coordinator candidate. Its gauges
// that describe the cluster are set by the leader on each membership pass.
// A candidate that stops leading drops its per-member, per-node and
// per-rollout series and reports no operation in flight; its cluster-wide
// gauges (fault tolerance, voters) keep the values it last saw, and its
// nico_coordinator_is_leader says so (alerts select on it).
type Coordinator struct {
	isLeader      prometheus.Gauge
	leaderChanges prometheus.Counter
	ops           *prometheus.CounterVec
	opDuration    *prometheus.HistogramVec
	inFlight      prometheus.Gauge
	opAge         prometheus.Gauge
	joinToVoter   prometheus.Histogram
	learner       *prometheus.GaugeVec
	tolerance     prometheus.Gauge
	members       *prometheus.GaugeVec
	healthyVoters prometheus.Gauge
	wantVoters    prometheus.Gauge
	memberVoter   *prometheus.GaugeVec
	nodes         *prometheus.GaugeVec
	nodeLiveness  *prometheus.GaugeVec
	rollProgress  *prometheus.GaugeVec
	rollHalted    *prometheus.GaugeVec
	rollSteps     *prometheus.HistogramVec
	// Snapshots are the etcd snapshot metrics (snapshots.go).
	Snapshots *Snapshots
	// Compaction are the etcd compaction metrics (compaction.go).
	Compaction *Compaction
	// Space are etcd's alarms, database sizes and data dirs (etcdspace.go).
	Space *EtcdSpace

	mu sync.Mutex // held through a membership pass
	// counted is the last operation whose outcome was counted: the planner
	// repeats a closing step until its write lands.
	counted string
	// passAt and joinsAt are the last pass's time and its join requests'
	// creation times, for MembershipStep.
	passAt  time.Time
	joinsAt map[string]time.Time
	// last holds each per-node vector's label sets of the last pass, so
	// that a pass deletes the series that went away instead of resetting
	// the vector (a scrape between a reset and the new values would see
	// no series, and an alert's for: would start over).
	last map[*prometheus.GaugeVec][][]string
}

// NewCoordinator makes the coordinator's metrics and registers them in r.
func NewCoordinator(r *Registry) *Coordinator {
	c := &Coordinator{
		isLeader:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_coordinator_is_leader", Help: "1 while this candidate is the elected coordinator leader, else 0."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "nico_coordinator_leader_changes_total", Help: "Times this candidate became or stopped being leader."}),
		ops:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nico_membership_operations_total", Help: "Membership operations this leader closed, by type (Join, Remove) and outcome (succeeded, failed)."}, []string{"type", "outcome"}),
		opDuration:    prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nico_membership_operation_duration_seconds", Help: "From journaling a membership operation to closing it, by type and outcome.", Buckets: durationBuckets}, []string{"type", "outcome"}),
		inFlight:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_membership_operations_in_flight", Help: "Membership operations journaled and not closed (at most 1)."}),
		opAge:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_membership_operation_step_age_seconds", Help: "How long the membership operation in flight has been at its current step; 0 when none is."}),
		joinToVoter:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nico_membership_join_to_voter_seconds", Help: "From a join request's creation to its member being a voter.", Buckets: durationBuckets}),
		learner:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_learner_progress_ratio", Help: "A learner's raft index over the etcd leader's (1: caught up), by member node."}, []string{"node"}),
		tolerance:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_quorum_fault_tolerance", Help: "Healthy voters the cluster can lose and keep quorum (negative: quorum is lost)."}),
		members:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_members", Help: "etcd members by role (voter, learner)."}, []string{"role"}),
		healthyVoters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_healthy_voters", Help: "Voters that answered their status call, with a registered node."}),
		wantVoters:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_desired_voters", Help: "Voters the EtcdCluster declares (0: the default)."}),
		memberVoter:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_member_is_voter", Help: "1 for each node whose etcd member is a voter, 0 for a learner."}, []string{"node"}),
		nodes:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_nodes", Help: "Registered nodes by liveness state (alive, suspect, dead)."}, []string{"state"}),
		nodeLiveness:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_node_liveness", Help: "1 for each node's current liveness state (alive, suspect, dead)."}, []string{"node", "state"}),
		rollProgress:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_rollout_progress_ratio", Help: "Nodes a rollout has finished over the nodes it covers."}, []string{"rollout"}),
		rollHalted:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_rollout_halted", Help: "1 while a rollout is halted on a failed node, else 0."}, []string{"rollout"}),
		rollSteps:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nico_rollout_step_duration_seconds", Help: "From a rollout writing a node's generation to marking the node done, by plane (control, data).", Buckets: durationBuckets}, []string{"plane"}),
		last:          map[*prometheus.GaugeVec][][]string{},
	}
	r.MustRegister(c.isLeader, c.leaderChanges, c.ops, c.opDuration, c.inFlight, c.opAge, c.joinToVoter, c.learner, c.tolerance,
		c.members, c.healthyVoters, c.wantVoters, c.memberVoter, c.nodes, c.nodeLiveness, c.rollProgress, c.rollHalted, c.rollSteps)
	c.Snapshots = newSnapshots(r)
	c.Compaction = newCompaction(r)
	c.Space = newEtcdSpace(r)
	return c
}

// Leading records that this candidate became (true) or stopped being
// (false) leader.
func (c *Coordinator) Leading(yes bool) {
	if c == nil {
		return
	}
	v := 0.0
	if yes {
		v = 1
	}
	c.isLeader.Set(v)
	c.leaderChanges.Inc()
	if yes {
		return
	}
	// A follower decides nothing: what it last saw of members, nodes and
	// rollouts would read as the leader's, so those series go.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range []*prometheus.GaugeVec{c.learner, c.memberVoter, c.members, c.nodes, c.nodeLiveness, c.rollProgress, c.rollHalted} {
		v.Reset()
	}
	clear(c.last)
	c.Space.reset()
	c.inFlight.Set(0)
	c.opAge.Set(0)
}

// MembershipPass records what the leader saw on one membership pass at
// now: the cluster's gauges from obs and live; MembershipStep then counts
// the step the pass took.
func (c *Coordinator) MembershipPass(obs membership.Observed, live map[string]membership.Liveness, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cluster(obs)
	c.liveness(obs, live)
	c.inFlight.Set(0)
	c.opAge.Set(0)
	if a := obs.Active; a != nil && a.Status.Phase == api.OpRunning && (a.Spec.Type == api.OpJoin || a.Spec.Type == api.OpRemove) {
		c.inFlight.Set(1)
		c.opAge.Set(now.Sub(a.Status.StepSince).Seconds())
	}
	c.passAt = now
	c.joinsAt = map[string]time.Time{}
	for _, j := range obs.Joins {
		c.joinsAt[j.Metadata.Name] = j.Metadata.CreatedAt
	}
}

// MembershipStep counts the step of the last pass once it was written
// (err nil) when it closes an operation: its outcome, its duration and,
// for a join, the time from the request to a voter.
func (c *Coordinator) MembershipStep(step membership.Step, err error) {
	if c == nil || err != nil || step.Op == nil {
		return
	}
	outcome := ""
	switch step.Action {
	case membership.FinishJoin, membership.FinishRemove:
		outcome = "succeeded"
	case membership.FailOp, membership.AbortJoin:
		outcome = "failed"
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	op := step.Op
	if c.counted == op.Metadata.Name {
		return
	}
	c.counted = op.Metadata.Name
	typ := string(op.Spec.Type)
	c.ops.WithLabelValues(typ, outcome).Inc()
	if !op.Metadata.CreatedAt.IsZero() {
		c.opDuration.WithLabelValues(typ, outcome).Observe(c.passAt.Sub(op.Metadata.CreatedAt).Seconds())
	}
	if at := c.joinsAt[step.Request]; step.Action == membership.FinishJoin && !at.IsZero() {
		c.joinToVoter.Observe(c.passAt.Sub(at).Seconds())
	}
}

// cluster sets the member gauges from the observed members.
func (c *Coordinator) cluster(obs membership.Observed) {
	p := membership.Project(obs.Members, membership.Change{})
	c.tolerance.Set(float64(p.Healthy - p.Quorum))
	c.healthyVoters.Set(float64(p.Healthy))
	c.wantVoters.Set(float64(obs.Cluster.Voters))
	var leaderIndex uint64
	voters, learners := 0, 0
	for _, m := range obs.Members {
		if m.Leader {
			leaderIndex = m.RaftIndex
		}
	}
	var learnerSets, voterSets [][]string
	defer func() { c.replace(c.learner, learnerSets); c.replace(c.memberVoter, voterSets) }()
	for _, m := range obs.Members {
		name := m.Node
		if name == "" {
			name = m.Name
		}
		if m.Learner {
			learners++
			ratio := 0.0
			if leaderIndex > 0 {
				ratio = min(float64(m.RaftIndex)/float64(leaderIndex), 1)
			}
			c.learner.WithLabelValues(name).Set(ratio)
			c.memberVoter.WithLabelValues(name).Set(0)
			learnerSets, voterSets = append(learnerSets, []string{name}), append(voterSets, []string{name})
			continue
		}
		voters++
		c.memberVoter.WithLabelValues(name).Set(1)
		voterSets = append(voterSets, []string{name})
	}
	c.members.WithLabelValues(api.RoleVoter).Set(float64(voters))
	c.members.WithLabelValues(api.RoleLearner).Set(float64(learners))
}

// replace deletes the series of v that the last pass set and this one
// (now) did not.
func (c *Coordinator) replace(v *prometheus.GaugeVec, now [][]string) {
	for _, old := range c.last[v] {
		if !slices.ContainsFunc(now, func(n []string) bool { return slices.Equal(n, old) }) {
			v.DeleteLabelValues(old...)
		}
	}
	c.last[v] = now
}

// liveness sets the node gauges: live when the leader has it (gossip
// and lease), else each node's lease.
func (c *Coordinator) liveness(obs membership.Observed, live map[string]membership.Liveness) {
	counts := map[membership.LiveState]int{membership.LiveAlive: 0, membership.LiveSuspect: 0, membership.LiveDead: 0}
	var seen [][]string
	defer func() { c.replace(c.nodeLiveness, seen) }()
	for _, n := range obs.Nodes {
		name := n.Metadata.Name
		state := membership.LiveDead
		if obs.Alive[name] {
			state = membership.LiveAlive
		}
		if l, ok := live[name]; ok {
			state = l.State
		}
		counts[state]++
		c.nodeLiveness.WithLabelValues(name, string(state)).Set(1)
		seen = append(seen, []string{name, string(state)})
	}
	for s, n := range counts {
		c.nodes.WithLabelValues(string(s)).Set(float64(n))
	}
}

// RolloutStep records a rollout step the leader wrote: ro is the rollout
// as written (its status after the step), now the step's time.
func (c *Coordinator) RolloutStep(ro *api.Rollout, now time.Time) {
	if c == nil || ro == nil {
		return
	}
	done, total := ro.Counts()
	ratio := 0.0
	if total > 0 {
		ratio = float64(done) / float64(total)
	}
	c.rollProgress.WithLabelValues(ro.Metadata.Name).Set(ratio)
	halted := 0.0
	if ro.Status.Phase == api.RolloutHalted {
		halted = 1
	}
	c.rollHalted.WithLabelValues(ro.Metadata.Name).Set(halted)
	for _, n := range ro.Status.Nodes {
		if n.Phase == api.NodeDone && n.FinishedAt.Equal(now) && !n.StartedAt.IsZero() {
			plane := "data"
			if n.ControlPlane {
				plane = "control"
			}
			c.rollSteps.WithLabelValues(plane).Observe(n.FinishedAt.Sub(n.StartedAt).Seconds())
		}
	}
}

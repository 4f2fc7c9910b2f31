// Package versionroll plans how the etcd version of the members nico runs
// changes to the EtcdCluster's spec.version. Plan is pure: it reads what
// the leader observed (each member's running version, the node's desired
// version, etcd's cluster version and downgrade state) and returns the
// next step; the coordinator's etcd-version controller applies it.
//
// It is a planner of its own rather than a Rollout: a generation rollout
// journals its progress because a node's generation says nothing about
// the order it was rolled in, while here every member reports the version
// it runs, so the roll's state is observed, never journaled, and a new
// leader resumes from it. It rolls in the generation rollout's order
// (pkg/rollout): one member at a time, by name (rollout.Natural),
// followers first, the etcd leader last after leadership moved to a
// member already on the new version, each step holding the one-change
// slot until the member serves, healthy, at the new version.
//
//	spec.version set, path allowed (etcdversion.Check from every running version)
//	  |
//	  +-- downgrade below the cluster version, not enabled --> EnableDowngrade (validate, enable)
//	  +-- a downgrade enabled that spec.version does not ask for --> CancelDowngrade
//	  +-- a member asked for the version, not yet serving it healthy --> Wait (or Halt after the step timeout)
//	  |     ... serving it, healthy, its step still holds the slot --> CloseOp
//	  +-- next follower not on the version --> SetVersion(node) (takes the slot)
//	  +-- only the leader left --> TransferLeader to an updated healthy voter, then SetVersion
//	  +-- every member nico runs is on the version --> Done
package versionroll

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdversion"
	"github.com/homystack/nico/pkg/rollout"
)

// DefaultStepTimeout bounds one member's version change when the policy
// sets none.
const DefaultStepTimeout = 5 * time.Minute

// OpPrefix starts the name of every operation a version step holds.
const OpPrefix = "etcdversion-"

// Member is one etcd member as the leader observed it.
type Member struct {
	// Name is the member's etcd name; Node the registered node that runs
	// it ("": a member nico does not run, never rolled).
	Name, Node string
	ID         api.MemberID
	ClientURL  string
	Voter      bool
	Healthy    bool
	Leader     bool
	// Alive: the node's heartbeat is live.
	Alive bool
	// Version is the etcd version the member reports ("": unknown);
	// StorageVersion its data's schema version ("3.6.0"), which etcd
	// lowers on every member once a downgrade is enabled: an older binary
	// refuses to start on a newer schema.
	Version, StorageVersion string
	// Want is the node's desired version (its NodeEtcdVersion, "": none)
	// and WantSince when the leader asked for it.
	Want      string
	WantSince time.Time
	// Error is the node's EtcdVersionError.
	Error string
}

// Observed is the planner's input.
type Observed struct {
	// Target is spec.version ("": no version is rolled).
	Target string
	// Cluster is etcd's cluster version ("3.6.0"); Downgrading and
	// DowngradeTarget its downgrade in progress.
	Cluster         string
	Downgrading     bool
	DowngradeTarget string
	Members         []Member
	// ActiveOp is the operation holding the one-change slot ("": none).
	ActiveOp    string
	StepTimeout time.Duration
}

// Action is what the executor does.
type Action string

// Actions.
const (
	None            Action = "None"
	Done            Action = "Done"    // every member nico runs is on Target
	Refused         Action = "Refused" // the version path is not allowed: nothing changes
	Wait            Action = "Wait"
	Halt            Action = "Halt"            // a step failed: nothing more is rolled
	EnableDowngrade Action = "EnableDowngrade" // downgrade validate, then enable, to Version
	CancelDowngrade Action = "CancelDowngrade"
	SetVersion      Action = "SetVersion"     // Node's desired version becomes Version; take the slot as Op
	TransferLeader  Action = "TransferLeader" // from the leader at LeaderURL to member To
	CloseOp         Action = "CloseOp"        // Op's member serves the version: release the slot
)

// Step is the planner's decision.
type Step struct {
	Action    Action
	Node      string
	Version   string
	Op        string
	To        api.MemberID
	LeaderURL string
	Reason    string
}

// String is a compact form for logs and tests.
func (s Step) String() string {
	out := string(s.Action)
	if s.Node != "" {
		out += " " + s.Node
	}
	if s.Version != "" {
		out += " " + s.Version
	}
	if s.Action == TransferLeader {
		out += " to=" + s.To.String()
	}
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}

// OpName is the name of the operation that holds the slot while node
// changes to version v.
func OpName(node, v string) string { return OpPrefix + node + "-" + v }

// Plan returns the next step toward obs.Target.
func Plan(obs Observed, now time.Time) Step {
	if obs.Target == "" {
		// nico does not manage the version: a downgrade someone enabled
		// by hand is theirs.
		return obs.closeOr(Step{Action: None, Reason: "no spec.version"})
	}
	if obs.Downgrading && !asksDowngradeTo(obs.Target, obs.DowngradeTarget) {
		return Step{Action: CancelDowngrade, Reason: fmt.Sprintf("a downgrade to %s is enabled and spec.version is %s", obs.DowngradeTarget, obs.Target)}
	}
	target, err := etcdversion.Parse(obs.Target)
	if err != nil {
		return obs.closeOr(Step{Action: Refused, Reason: "spec.version: " + err.Error()})
	}
	ours := obs.ours()
	if s, ok := checkPaths(obs, target); !ok {
		return obs.closeOr(s)
	}
	if s, ok := planInFlight(obs, ours, now); ok {
		return s
	}
	var todo []Member
	for _, m := range ours {
		if m.Version != obs.Target {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return Step{Action: Done, Version: obs.Target, Reason: fmt.Sprintf("%d members run %s", len(ours), obs.Target)}
	}
	if obs.ActiveOp != "" {
		return Step{Action: Wait, Reason: "operation " + obs.ActiveOp + " is in flight"}
	}
	if cv, err := etcdversion.Parse(obs.Cluster); err == nil && cv.Minor > target.Minor && !obs.Downgrading {
		return Step{Action: EnableDowngrade, Version: obs.Target, Reason: fmt.Sprintf("cluster version %s is above %s: downgrade through etcd's downgrade API", obs.Cluster, obs.Target)}
	} else if err != nil {
		return Step{Action: Wait, Reason: fmt.Sprintf("cluster version %q unknown", obs.Cluster)}
	}
	if why := unhealthy(obs.Members); why != "" {
		return Step{Action: Wait, Reason: "etcd cluster is not healthy: " + why}
	}
	var leader *Member
	for i := range todo {
		m := &todo[i]
		if !m.Alive {
			return Step{Action: Wait, Node: m.Node, Reason: m.Node + " is down (no heartbeat); not changing its version"}
		}
		if m.Leader {
			leader = m
			continue
		}
		if why := notMigrated(obs, m, target); why != "" {
			return Step{Action: Wait, Node: m.Node, Reason: why}
		}
		return obs.set(m, "one member at a time, followers first")
	}
	for _, m := range ours {
		if m.Node != leader.Node && m.Voter && m.Healthy && m.Alive && m.Version == obs.Target {
			return Step{Action: TransferLeader, Node: leader.Node, To: m.ID, LeaderURL: leader.ClientURL,
				Reason: fmt.Sprintf("%s leads etcd: moving leadership to %s, which runs %s, before it changes version", leader.Node, m.Node, obs.Target)}
		}
	}
	for _, m := range obs.Members {
		if m.Name != leader.Name && m.Voter {
			return Step{Action: Halt, Node: leader.Node, Reason: fmt.Sprintf("%s leads etcd and no healthy voter on %s can take leadership", leader.Node, obs.Target)}
		}
	}
	if why := notMigrated(obs, leader, target); why != "" {
		return Step{Action: Wait, Node: leader.Node, Reason: why}
	}
	return obs.set(leader, "the only voter changes version in place")
}

// notMigrated says why m cannot restart on target yet, or "": a member
// going down a minor waits for etcd to lower the cluster version and its
// storage version to target's minor, as etcd's downgrade requires.
func notMigrated(obs Observed, m *Member, target etcdversion.Version) string {
	v, err := etcdversion.Parse(m.Version)
	if err != nil || v.Minor <= target.Minor {
		return ""
	}
	want := target.MinorString() + ".0"
	if obs.Cluster != want || m.StorageVersion != want {
		return fmt.Sprintf("waiting for etcd to lower the cluster version (%s) and %s's storage version (%q) to %s before it downgrades", obs.Cluster, m.Node, m.StorageVersion, want)
	}
	return ""
}

// checkPaths refuses a target that some member cannot go to in one step.
func checkPaths(obs Observed, target etcdversion.Version) (Step, bool) {
	seen := map[string]bool{}
	for _, m := range obs.Members {
		if m.Version == "" || m.Version == obs.Target || seen[m.Version] {
			continue
		}
		seen[m.Version] = true
		from, err := etcdversion.Parse(m.Version)
		if err == nil {
			_, err = etcdversion.Check(from, target)
		}
		if err != nil {
			return Step{Action: Refused, Version: obs.Target, Reason: fmt.Sprintf("%s runs %s: %v", m.Name, m.Version, err)}, false
		}
	}
	return Step{}, true
}

// planInFlight judges the member whose version change is under way: asked
// for Target, not yet serving it healthy.
func planInFlight(obs Observed, ours []Member, now time.Time) (Step, bool) {
	timeout := obs.StepTimeout
	if timeout <= 0 {
		timeout = DefaultStepTimeout
	}
	for _, m := range ours {
		if m.Want != obs.Target || (m.Version == obs.Target && m.Healthy) {
			continue
		}
		why := fmt.Sprintf("waiting for %s to serve %s, healthy (runs %q)", m.Node, obs.Target, m.Version)
		if m.Error != "" {
			why += ": " + m.Error
		}
		if now.Sub(m.WantSince) >= timeout {
			return Step{Action: Halt, Node: m.Node, Op: obs.ourOp(), Reason: fmt.Sprintf("%s did not serve %s, healthy, within %s (%s)", m.Node, obs.Target, timeout, why)}, true
		}
		return Step{Action: Wait, Node: m.Node, Reason: why}, true
	}
	if op := obs.ourOp(); op != "" {
		return Step{Action: CloseOp, Op: op, Reason: "no member is changing version"}, true
	}
	return Step{}, false
}

// closeOr releases a version step's slot left held, or returns s.
func (o Observed) closeOr(s Step) Step {
	if op := o.ourOp(); op != "" {
		return Step{Action: CloseOp, Op: op, Reason: "spec.version changed: " + s.String()}
	}
	return s
}

// set asks m's node to run Target.
func (o Observed) set(m *Member, why string) Step {
	return Step{Action: SetVersion, Node: m.Node, Version: o.Target, Op: OpName(m.Node, o.Target), Reason: fmt.Sprintf("%s runs %s; %s", m.Node, m.Version, why)}
}

// ours are the members nico runs, in rolling order.
func (o Observed) ours() []Member {
	var out []Member
	for _, m := range o.Members {
		if m.Node != "" {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return rollout.Natural(a.Node, b.Node) })
	return out
}

// ourOp is ActiveOp when a version step holds it.
func (o Observed) ourOp() string {
	if strings.HasPrefix(o.ActiveOp, OpPrefix) {
		return o.ActiveOp
	}
	return ""
}

// asksDowngradeTo reports whether target is on the minor of a downgrade
// to downgradeTarget ("3.6.0").
func asksDowngradeTo(target, downgradeTarget string) bool {
	t, err := etcdversion.Parse(target)
	if err != nil {
		return false
	}
	d, err := etcdversion.Parse(downgradeTarget)
	return err == nil && t.SameMinor(d)
}

// unhealthy names what keeps the cluster from taking a step, or "".
func unhealthy(ms []Member) string {
	leader := false
	var sick []string
	for _, m := range ms {
		if m.Leader {
			leader = true
		}
		if m.Voter && !m.Healthy {
			sick = append(sick, m.Name)
		}
	}
	if len(sick) > 0 {
		return "unhealthy voters: " + strings.Join(sick, ", ")
	}
	if !leader {
		return "no etcd leader"
	}
	return ""
}

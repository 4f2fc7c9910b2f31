package membership

import (
	"fmt"
	"sort"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Voter count. The EtcdCluster's spec.voters is the number of voting
// members wanted; control-plane hosts beyond it are standbys, whose join
// requests stay pending (marked Standby) with no learner kept around.
//
//	voters+learner < spec.voters, a standby waits --> StartJoin (best standby, one learner at a time)
//	voters+learner >= spec.voters, a request waits --> MarkStandby (once per request)
//	voters > spec.voters, nothing in flight        --> FileRemoval (best voter to shed; the removal path
//	                                                   transfers leadership first if it leads)
//	a voter dead for replaceDeadMembersAfter       --> FileRemoval, then the count is short by one:
//	                                                   StartJoin of a standby (remove, then add)
//
// Every change goes through the journaled join or removal operation, so
// there is at most one in flight, and each passes the quorum projection.

// desiredVoters is spec.voters, api.DefaultVoters when unset.
func (o Observed) desiredVoters() int {
	if o.Cluster.Voters > 0 {
		return o.Cluster.Voters
	}
	return api.DefaultVoters
}

// voterCount counts the voting members (ghosts and external ones too: they
// vote).
func (o Observed) voterCount() int {
	n := 0
	for _, m := range o.Members {
		if !m.Learner {
			n++
		}
	}
	return n
}

// domainOf is node's failure domain: its topology label ("" without one).
func (o Observed) domainOf(node string) string {
	if n := o.node(node); n != nil {
		return n.Spec.Labels[api.LabelTopology]
	}
	return ""
}

// votersByDomain counts the voters in each failure domain.
func (o Observed) votersByDomain() map[string]int {
	out := map[string]int{}
	for _, m := range o.Members {
		if !m.Learner && m.Node != "" {
			out[o.domainOf(m.Node)]++
		}
	}
	return out
}

// registeredAt is when node registered (zero when unknown).
func (o Observed) registeredAt(node string) time.Time {
	if n := o.node(node); n != nil {
		return n.Metadata.CreatedAt
	}
	return time.Time{}
}

// rankStandbys orders the join requests a grow picks from, best first:
//  1. alive before suspect: a suspect node blocks the change anyway;
//  2. the failure domain with the fewest voters (only differs when nodes
//     carry a topology label): losing one domain then costs the fewest
//     voters. It comes before age because registration times are nearly
//     always distinct, so a spread ranked after age would never apply;
//  3. the longest alive: the earliest registration, then the earliest
//     request (a node that has stayed up is likelier to stay up);
//  4. the name, so that the plan is deterministic.
func (o Observed) rankStandbys(reqs []*api.JoinRequest) {
	byDomain := o.votersByDomain()
	sort.SliceStable(reqs, func(i, j int) bool {
		a, b := reqs[i], reqs[j]
		an, bn := a.Spec.Node, b.Spec.Node
		if sa, sb := o.live(an).State == LiveAlive, o.live(bn).State == LiveAlive; sa != sb {
			return sa
		}
		if da, db := byDomain[o.domainOf(an)], byDomain[o.domainOf(bn)]; da != db {
			return da < db
		}
		if ra, rb := o.registeredAt(an), o.registeredAt(bn); !ra.Equal(rb) {
			return ra.Before(rb)
		}
		if ca, cb := a.Metadata.CreatedAt, b.Metadata.CreatedAt; !ca.Equal(cb) {
			return ca.Before(cb)
		}
		return an < bn
	})
}

// rankShed orders the voters a shrink picks from, best to remove first:
//  1. unhealthy (dead included) first: removing one costs no healthy voter;
//  2. followers before the leader: the leader goes last, and then only
//     after the removal path has moved leadership away;
//  3. a machine the cluster asked a pool for before a host that came on
//     its own: once shed, its VM is taken away (package machineclaim);
//  4. the failure domain with the most voters;
//  5. the youngest registration (keep the longest alive), then the name.
func (o Observed) rankShed(ms []Member) {
	byDomain := o.votersByDomain()
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.Healthy != b.Healthy {
			return !a.Healthy
		}
		if a.Leader != b.Leader {
			return !a.Leader
		}
		if ca, cb := o.Claimed[a.Node], o.Claimed[b.Node]; ca != cb {
			return ca
		}
		if da, db := byDomain[o.domainOf(a.Node)], byDomain[o.domainOf(b.Node)]; da != db {
			return da > db
		}
		if ra, rb := o.registeredAt(a.Node), o.registeredAt(b.Node); !ra.Equal(rb) {
			return ra.After(rb)
		}
		return a.Node < b.Node
	})
}

// anyRemovalPending tells whether a removal request is not finished.
func (o Observed) anyRemovalPending() bool {
	for _, r := range o.Removals {
		if !r.Status.Phase.Finished() {
			return true
		}
	}
	return false
}

// planStandbys marks the first pending request that is not marked yet as
// a standby: the cluster has, or is about to have, the voters it wants.
func planStandbys(obs Observed, reqs []*api.JoinRequest, have, want int) (Step, bool) {
	for _, j := range reqs {
		if j.Status.Standby {
			continue
		}
		s := Step{Request: j.Spec.Node}
		return with(s, MarkStandby, fmt.Sprintf("standby: the cluster has %d of %d voters (spec.voters)", have, want)), true
	}
	return Step{}, false
}

// planShrink files the removal of one voter when there are more than
// spec.voters, nothing else is in flight, and removing it keeps quorum.
// The removal request goes through the usual removal path, which moves
// etcd leadership away first when the voter leads.
func planShrink(obs Observed) (Step, bool) {
	have, want := obs.voterCount(), obs.desiredVoters()
	if have <= want || len(obs.learners()) > 0 || obs.anyRemovalPending() {
		return Step{}, false
	}
	var cands []Member
	for _, m := range obs.Members {
		if !m.Learner && m.Node != "" {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return Step{}, false
	}
	obs.rankShed(cands)
	m := cands[0]
	s := Step{Request: m.Node, Member: m.ID}
	if reason := removeBlocker(obs, &m, false); reason != "" {
		return with(s, Wait, fmt.Sprintf("the cluster has %d voters, spec.voters is %d, but %s", have, want, reason)), true
	}
	if r := obs.suspectBlocker("", m.Node); r != "" {
		return with(s, Wait, r), true
	}
	role := "a follower"
	if m.Leader {
		role = "the leader (leadership moves first)"
	}
	s.Standby = true
	return with(s, FileRemoval, fmt.Sprintf("the cluster has %d voters, spec.voters is %d: removing %s, %s; it stays as a standby", have, want, m.Node, role)), true
}

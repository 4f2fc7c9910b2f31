package membership

import (
	"fmt"
	"sort"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// External members are the EtcdCluster's spec.members of kind external:
// etcd members nico does not run (no node, no agent, no heartbeat). Only
// their on- and off-boarding is nico's, through the same one-change-at-a-time
// operations as nodes', marked External (Spec.Node is the member's name):
//
//	in spec, not a member ──▶ StartJoin ──▶ AddLearner (record it, publish
//	    its --initial-cluster in status.external) ──▶ Learner: promote once
//	    caught up (start and progress timeouts abort it) ──▶ voter
//	recorded, out of spec, still a member ──▶ StartRemove ──▶ [TransferLeader
//	    when it leads] ──▶ RemoveMember (quorum projected) ──▶ gone
//	recorded, no longer a member ──▶ ForgetExternal
//
// Joins of nodes and dead-member replacement go first: an external member
// that never starts holds the learner slot only between their turns.

// externalSpecs are the spec's members of kind external, with a peer URL.
func (o Observed) externalSpecs() []api.EtcdMemberSpec {
	var out []api.EtcdMemberSpec
	for _, m := range o.Cluster.Members {
		if m.Kind == api.MemberExternal && m.Name != "" && len(m.PeerURLs) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// externalSpec returns the spec of external member name, or nil.
func (o Observed) externalSpec(name string) *api.EtcdMemberSpec {
	for _, m := range o.externalSpecs() {
		if m.Name == name {
			return &m
		}
	}
	return nil
}

// withExternal marks the external members (MatchExternal). It copies
// Members.
func (o Observed) withExternal() Observed {
	ms := make([]Member, len(o.Members))
	copy(ms, o.Members)
	MatchExternal(ms, o.Cluster, o.Onboarded)
	o.Members = ms
	return o
}

// MatchExternal sets External on each member no node claims (MatchNodes
// first) that is an external member: declared in spec (by peer URL), or
// on-boarded by nico (onboarded: name -> peer URL, store.ExternalMembersDir)
// and not yet gone. Those are judged by their etcd health and never taken
// for ghosts.
func MatchExternal(members []Member, spec api.EtcdClusterSpec, onboarded map[string]string) {
	specs := Observed{Cluster: spec}.externalSpecs()
	for i := range members {
		if members[i].Node != "" {
			continue
		}
		for _, sp := range specs {
			if sharesPeer(members[i], sp.PeerURLs) {
				members[i].External = sp.Name
			}
		}
		if members[i].External != "" {
			continue
		}
		for name, peer := range onboarded {
			if hasPeer(members[i], peer) {
				members[i].External = name
			}
		}
	}
}

// memberByPeers finds the member with any of peers.
func (o Observed) memberByPeers(peers []string) *Member {
	for _, p := range peers {
		if m := o.memberByPeer(p); m != nil {
			return m
		}
	}
	return nil
}

func sharesPeer(m Member, peers []string) bool {
	for _, p := range peers {
		if hasPeer(m, p) {
			return true
		}
	}
	return false
}

// planAnyJoinOp plans the active join: an external member's that left the
// spec while still a learner (or not yet added) is abandoned, its learner
// removed; any other goes on as a node's.
func planAnyJoinOp(obs Observed, pol Policy, now time.Time, op *api.Operation) Step {
	if op.Spec.External && obs.externalSpec(op.Spec.Node) == nil {
		m := obs.memberByPeer(op.Spec.PeerURL)
		if m == nil || m.Learner {
			s := Step{Op: op, Member: op.Spec.MemberID, External: op.Spec.Node}
			if m != nil {
				s.Member = m.ID
			}
			return with(s, AbortJoin, fmt.Sprintf("external member %s left the spec", op.Spec.Node))
		}
	}
	return planJoinOp(obs, pol, now, op)
}

// planExternal off-boards the recorded external members that left the
// spec, then on-boards the declared ones that are not members yet.
func planExternal(obs Observed, now time.Time) (Step, bool) {
	if s, ok := planExternalRemovals(obs, now); ok {
		return s, true
	}
	return planExternalJoins(obs, now)
}

func planExternalRemovals(obs Observed, now time.Time) (Step, bool) {
	names := make([]string, 0, len(obs.Onboarded))
	for n := range obs.Onboarded {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		peer := obs.Onboarded[name]
		if sp := obs.externalSpec(name); sp != nil && containsString(sp.PeerURLs, peer) {
			continue
		}
		s := Step{External: name, PeerURL: peer}
		m := obs.memberByPeer(peer)
		if m == nil {
			return with(s, ForgetExternal, fmt.Sprintf("external member %s is no longer a member", name)), true
		}
		if m.Node != "" {
			// A node registered at its peer URL: the member is the
			// node's now, removed only as a node's.
			return with(s, ForgetExternal, fmt.Sprintf("the member at %s is node %s's", peer, m.Node)), true
		}
		s.Member = m.ID
		if reason := removeBlocker(obs, m, false); reason != "" {
			return with(s, Wait, fmt.Sprintf("external member %s left the spec: %s", name, reason)), true
		}
		if r := obs.suspectBlocker("", ""); r != "" {
			return with(s, Wait, r), true
		}
		op := newOp(now, api.OpRemove, name)
		op.Spec.External = true
		op.Spec.MemberID = m.ID
		op.Spec.PeerURL = peer
		op.Status.Step = api.StepRemoveMember
		s.Op = op
		return with(s, StartRemove, fmt.Sprintf("external member %s left the spec", name)), true
	}
	return Step{}, false
}

func planExternalJoins(obs Observed, now time.Time) (Step, bool) {
	var conflict *Step
	for _, sp := range obs.externalSpecs() {
		s := Step{External: sp.Name, PeerURL: sp.PeerURLs[0]}
		if n := obs.nodeAtPeers(sp.PeerURLs); n != "" {
			// Never on-board, nor later off-board, a node's member as
			// external; said only when nothing else is to be done.
			if conflict == nil {
				w := with(s, Wait, fmt.Sprintf("external member %s declares a peer URL of node %s; it is not on-boarded", sp.Name, n))
				conflict = &w
			}
			continue
		}
		m := obs.memberByPeers(sp.PeerURLs)
		if m != nil {
			s.Member = m.ID
			s.PeerURL = m.PeerURLs[0]
			for _, u := range sp.PeerURLs {
				if hasPeer(*m, u) {
					s.PeerURL = u
					break
				}
			}
		}
		if m != nil && !m.Learner {
			if obs.Onboarded[sp.Name] != s.PeerURL {
				return with(s, RecordExternal, fmt.Sprintf("external member %s is a voter", sp.Name)), true
			}
			continue
		}
		if ls := obs.learners(); len(ls) > 0 && (m == nil || ls[0].ID != m.ID) {
			return with(s, Wait, fmt.Sprintf("one learner at a time: %s is a learner", ls[0].label())), true
		}
		if p := Project(obs.Members, Change{}); !p.OK {
			return with(s, Wait, "cluster is not healthy: "+p.Reason), true
		}
		if r := obs.suspectBlocker("", ""); r != "" {
			return with(s, Wait, r), true
		}
		op := newOp(now, api.OpJoin, sp.Name)
		op.Spec.External = true
		op.Spec.PeerURL = s.PeerURL
		if len(sp.ClientURLs) > 0 {
			op.Spec.ClientURL = sp.ClientURLs[0]
		}
		op.Status.Step = api.StepAddLearner
		s.Op = op
		return with(s, StartJoin, fmt.Sprintf("external member %s is declared", sp.Name)), true
	}
	if conflict != nil {
		return *conflict, true
	}
	return Step{}, false
}

// nodeAtPeers names the registered node whose peer URL is one of peers, or "".
func (o Observed) nodeAtPeers(peers []string) string {
	for _, n := range o.Nodes {
		if n.Spec.PeerURL != "" && containsString(peers, n.Spec.PeerURL) {
			return n.Metadata.Name
		}
	}
	return ""
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

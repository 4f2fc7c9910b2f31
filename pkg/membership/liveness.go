package membership

import (
	"fmt"
	"sort"
	"time"
)

// LiveState is a node's liveness as the coordinator sees it.
type LiveState string

// Liveness states. A node with no entry in Observed.Liveness is taken as
// alive (its heartbeat lease still gates joins through Observed.Alive).
const (
	LiveAlive   LiveState = "alive"
	LiveSuspect LiveState = "suspect"
	LiveDead    LiveState = "dead"
)

// Liveness is a node's liveness and when it last changed.
type Liveness struct {
	State LiveState
	Since time.Time
	// Reason says what decided it: "gossip", "lease", "gossip left".
	Reason string
}

// Gossip states as CombineLiveness takes them (package gossip's names).
const (
	GossipAlive   = "alive"
	GossipSuspect = "suspect"
	GossipDead    = "dead"
	GossipLeft    = "left"
)

// CombineLiveness decides a node's liveness from what gossip says of it
// (gossipState "" when the node is not in the mesh) and whether its
// heartbeat lease is live, leaseSince being when the coordinator last saw
// the lease change (zero when unknown). Gossip is the faster signal:
//
//	gossip       lease   liveness
//	dead / left  any     dead     (since gossip's time)
//	suspect      any     suspect  (since gossip's time)
//	alive        live    alive
//	alive        gone    suspect  (it gossips but cannot reach etcd)
//	(none)       live    alive
//	(none)       gone    dead
func CombineLiveness(gossipState string, gossipSince time.Time, leaseLive bool, leaseSince time.Time) Liveness {
	switch gossipState {
	case GossipDead:
		return Liveness{LiveDead, gossipSince, "gossip"}
	case GossipLeft:
		return Liveness{LiveDead, gossipSince, "gossip left"}
	case GossipSuspect:
		return Liveness{LiveSuspect, gossipSince, "gossip"}
	case GossipAlive:
		if leaseLive {
			return Liveness{LiveAlive, gossipSince, "gossip"}
		}
		return Liveness{LiveSuspect, leaseSince, "lease expired, gossip alive"}
	}
	if leaseLive {
		return Liveness{LiveAlive, leaseSince, "lease"}
	}
	return Liveness{LiveDead, leaseSince, "lease"}
}

// live returns node's liveness; unknown nodes are alive.
func (o Observed) live(node string) Liveness {
	if l, ok := o.Liveness[node]; ok {
		return l
	}
	return Liveness{State: LiveAlive}
}

// withLiveness marks the members of dead nodes unhealthy, so the quorum
// projection counts them against quorum even when their status answered
// from a stale cache. It copies Members.
func (o Observed) withLiveness() Observed {
	if len(o.Liveness) == 0 {
		return o
	}
	ms := make([]Member, len(o.Members))
	copy(ms, o.Members)
	for i := range ms {
		if ms[i].Node != "" && o.live(ms[i].Node).State == LiveDead {
			ms[i].Healthy = false
		}
	}
	o.Members = ms
	return o
}

// suspectBlocker says which node a change concerning subject depends on
// is suspect, or "". It depends on subject (unless excluded) and on the
// node of every member but exclude's.
func (o Observed) suspectBlocker(subject, exclude string) string {
	names := []string{}
	if subject != "" && subject != exclude {
		names = append(names, subject)
	}
	for _, m := range o.Members {
		if m.Node != "" && m.Node != exclude && m.Node != subject {
			names = append(names, m.Node)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if l := o.live(n); l.State == LiveSuspect {
			return fmt.Sprintf("%s is suspect since %s (%s); no membership change until it is alive or dead", n, l.Since.UTC().Format(time.RFC3339), l.Reason)
		}
	}
	return ""
}

// planDeadReplacement files the removal of a voter whose node has been
// dead for at least pol.ReplaceDeadMembersAfter (0: never), if removing it
// keeps quorum.
func planDeadReplacement(obs Observed, pol Policy, now time.Time) (Step, bool) {
	if pol.ReplaceDeadMembersAfter <= 0 {
		return Step{}, false
	}
	var dead []Member
	for _, m := range obs.Members {
		if m.Learner || m.Node == "" || obs.removalPending(m.Node) {
			continue
		}
		if l := obs.live(m.Node); l.State == LiveDead && !l.Since.IsZero() && now.Sub(l.Since) >= pol.ReplaceDeadMembersAfter {
			dead = append(dead, m)
		}
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].Node < dead[j].Node })
	for _, m := range dead {
		l := obs.live(m.Node)
		s := Step{Request: m.Node, Member: m.ID}
		if p := Project(obs.Members, Change{}); !p.OK {
			return with(s, Wait, fmt.Sprintf("%s is dead for %s but cannot be replaced: the cluster has no healthy quorum to remove it (%s)", m.Node, now.Sub(l.Since).Round(time.Second), p.Reason)), true
		}
		if reason := removeBlocker(obs, &m, false); reason != "" {
			return with(s, Wait, fmt.Sprintf("%s is dead for %s but cannot be replaced: %s", m.Node, now.Sub(l.Since).Round(time.Second), reason)), true
		}
		if r := obs.suspectBlocker("", m.Node); r != "" {
			return with(s, Wait, r), true
		}
		return with(s, FileRemoval, fmt.Sprintf("%s is dead for %s (replaceDeadMembersAfter %s)", m.Node, now.Sub(l.Since).Round(time.Second), pol.ReplaceDeadMembersAfter)), true
	}
	return Step{}, false
}

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
	// Reason says what decided it: "gossip", "lease", "gossip left",
	// "etcd member answers, lease live; gossip dead" (see CombineLiveness).
	Reason string
}

// Gossip states as CombineLiveness takes them (package gossip's names).
const (
	GossipAlive   = "alive"
	GossipSuspect = "suspect"
	GossipDead    = "dead"
	GossipLeft    = "left"
)

// Signals is what the coordinator knows of one node when it decides its
// liveness.
type Signals struct {
	// Gossip is the node's state in the coordinator's mesh member (package
	// gossip's names), "" when the node is not in the mesh; GossipSince is
	// when that state changed.
	Gossip      string
	GossipSince time.Time
	// LeaseLive tells whether the node's heartbeat lease is live;
	// LeaseSince is when the coordinator saw it come or go (zero: unknown).
	LeaseLive  bool
	LeaseSince time.Time
	// MemberAnswers: the node has an etcd member (voter or learner) and it
	// answered the coordinator's status call within the health timeout
	// (Member.Healthy).
	MemberAnswers bool
}

// CombineLiveness decides a node's liveness from its signals. Gossip is
// the fast signal (a crash is seen within a second or so, while a lease
// outlives its holder by up to its TTL), so it decides, with one
// exception: a node the mesh calls dead or left whose etcd member answers
// and whose heartbeat lease is live is alive. Those two are direct
// evidence, not a proxy: the status call reached the member itself, and
// the lease is renewed only through the raft leader, by the agent, within
// the TTL. A node out of the mesh that serves etcd and renews its lease
// has lost its gossip (its seeds gone, a port blocked), not its member;
// calling it dead would count a serving voter against quorum and, with
// replaceDeadMembersAfter, remove it. A node that really stopped loses
// its member's answer at the same moment as its gossip, so gossip's dead
// stands at once and the exception costs no detection time. Suspect is
// kept even with both etcd signals: it is short-lived (memberlist either
// refutes it or declares the node dead within its suspicion timeout), and
// waiting out a short doubt before a membership change costs little.
//
//	gossip       lease   member answers   liveness
//	dead / left  live    yes              alive    (reason "etcd member answers, lease live; gossip dead")
//	dead / left  any     no               dead     (since gossip's time)
//	dead / left  gone    any              dead     (since gossip's time)
//	suspect      any     any              suspect  (since gossip's time)
//	alive        live    any              alive
//	alive        gone    any              suspect  (it gossips but cannot reach etcd)
//	(none)       live    any              alive
//	(none)       gone    any              dead
func CombineLiveness(s Signals) Liveness {
	switch s.Gossip {
	case GossipDead, GossipLeft:
		if s.LeaseLive && s.MemberAnswers {
			return Liveness{LiveAlive, s.GossipSince, "etcd member answers, lease live; gossip " + s.Gossip}
		}
		if s.Gossip == GossipLeft {
			return Liveness{LiveDead, s.GossipSince, "gossip left"}
		}
		return Liveness{LiveDead, s.GossipSince, "gossip"}
	case GossipSuspect:
		return Liveness{LiveSuspect, s.GossipSince, "gossip"}
	case GossipAlive:
		if s.LeaseLive {
			return Liveness{LiveAlive, s.GossipSince, "gossip"}
		}
		return Liveness{LiveSuspect, s.LeaseSince, "lease expired, gossip alive"}
	}
	if s.LeaseLive {
		return Liveness{LiveAlive, s.LeaseSince, "lease"}
	}
	return Liveness{LiveDead, s.LeaseSince, "lease"}
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

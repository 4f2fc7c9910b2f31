// Package defrag plans etcd's defragmentation: which member to
// defragment next, or none and why. One member at a time, the leader last,
// never beside another change in flight. It is pure.
//
//	   +-------- op in flight / CORRUPT / quorum at risk --------+
//	   v                                                          |
//	[Wait] <---+                                                  |
//	           |  policy off / nothing fragmented                 |
//	[None] <---+-------------------- Plan ------------------------+
//	           |
//	[Defrag m] ----> the caller holds the active-op slot, defragments
//	                 m, releases the slot, and plans again
package defrag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
)

// Action is what Plan decided.
type Action string

// Actions.
const (
	None   Action = "None"
	Wait   Action = "Wait"
	Defrag Action = "Defrag"
)

// Observed is what Plan looks at.
type Observed struct {
	Members []etcdadmin.MemberStatus
	Alarms  []etcdadmin.Alarm
	// Leader is the etcd leader's ID (0: unknown).
	Leader api.MemberID
	// Active is the name of the operation holding the one-change-in-flight
	// slot ("" none).
	Active string
	// Done are members already defragmented since their NOSPACE alarm:
	// the alarm alone does not make them due again.
	Done map[api.MemberID]bool
	// External are members nico does not run (spec.members): they count
	// for quorum, and are never defragmented by nico.
	External map[api.MemberID]bool
}

// Policy is spec.policy's defragmentation knobs.
type Policy struct {
	// Fragmentation is the (db size - in use) / db size that triggers it;
	// zero never defragments.
	Fragmentation float64
	// MinDBSize skips members whose database is smaller.
	MinDBSize int64
}

// Step is one decision.
type Step struct {
	Action Action
	Member etcdadmin.MemberStatus
	Reason string
}

// String is the step for logs.
func (s Step) String() string {
	if s.Action == Defrag {
		return fmt.Sprintf("%s %s: %s", s.Action, label(s.Member), s.Reason)
	}
	return fmt.Sprintf("%s: %s", s.Action, s.Reason)
}

func label(m etcdadmin.MemberStatus) string {
	if m.Name != "" {
		return m.Name
	}
	return m.ID.String()
}

// Fragmentation is (db size - in use) / db size, 0 for an empty or unknown
// size.
func Fragmentation(m etcdadmin.MemberStatus) float64 {
	if m.DBSize <= 0 || m.DBSizeInUse >= m.DBSize {
		return 0
	}
	return float64(m.DBSize-m.DBSizeInUse) / float64(m.DBSize)
}

// Plan returns the next member to defragment, or why none. A member is due
// when its fragmentation reaches the policy's and its database is at least
// MinDBSize, or when it raised NOSPACE and was not defragmented since (or
// was, and NoSpaceRefrag of its file is free again); NOSPACE members are
// due with the policy off too.
// Followers go first, most fragmented first (then by name); the leader
// only when no follower is due. It waits while an operation is in flight,
// while a CORRUPT alarm stands (an operator must act), while a member does
// not answer, and while blocking a voter would leave fewer healthy voters
// than quorum (a one-voter cluster is defragmented anyway: there is no
// other way, and it pauses for the call's length; so is an alarmed member
// of two voters both serving, under NOSPACE). A member whose status
// reports only an alarm serves.
//
// Under NOSPACE every voter nico runs that answers is due as well, once
// in the episode (Done), alarmed or not, after the alarmed ones: a member
// that joins receives the leader's database file, free pages included,
// as its snapshot, and etcd counts that file's size against the joiner's
// quota. A learner past its quota raises NOSPACE, and etcd neither
// defragments nor promotes a learner; the reclaim leaves no such file
// (Disarm waits for it). A learner is never due: etcd refuses the call;
// one that raised NOSPACE is named in a Wait for an operator. A member started before the declared quota runs
// etcd's default and raises nothing while its file grows as the others'.
func Plan(obs Observed, pol Policy) Step {
	noSpace := map[api.MemberID]bool{}
	for _, a := range obs.Alarms {
		if a.Type == etcdadmin.AlarmNoSpace {
			noSpace[a.Member] = true
		}
	}
	if pol.Fragmentation <= 0 && len(noSpace) == 0 {
		return Step{Action: None, Reason: "defragmentation is off (spec.policy.defragFragmentation is 0)"}
	}
	// Under NOSPACE an operation in flight cannot write its next step
	// either: only reclaiming the space lets it go on, so the alarmed
	// members are defragmented beside it (and nothing else is).
	if obs.Active != "" && len(noSpace) == 0 {
		return Step{Action: Wait, Reason: "operation " + obs.Active + " is in flight"}
	}
	for _, a := range obs.Alarms {
		if a.Type == etcdadmin.AlarmCorrupt {
			return Step{Action: Wait, Reason: "CORRUPT alarm on " + a.Member.String() + ": an operator must act"}
		}
	}
	var due []etcdadmin.MemberStatus
	var stuck string // a learner that raised NOSPACE
	voters, healthy := 0, 0
	for _, m := range obs.Members {
		ok := serving(m)
		if !m.Learner {
			voters++
			if ok {
				healthy++
			}
		}
		f := Fragmentation(m)
		if obs.External[m.ID] {
			continue
		}
		// etcd refuses to defragment a learner ("rpc not supported for
		// learner"), whatever its file.
		if m.Learner {
			if noSpace[m.ID] && stuck == "" {
				stuck = label(m)
			}
			continue
		}
		// A NOSPACE member is due even when it shows nothing to reclaim:
		// bbolt counts freed pages only from a later commit, and under
		// NOSPACE there may be none. Once defragmented it is due again
		// when space was freed since (data deleted and compacted), with
		// defragmentation off too: reclaiming is how NOSPACE ends.
		reclaim := noSpace[m.ID] && (!obs.Done[m.ID] || f >= NoSpaceRefrag)
		reclaim = reclaim || (len(noSpace) > 0 && shipsFile(obs, m) && !obs.Done[m.ID])
		byPolicy := obs.Active == "" && pol.Fragmentation > 0 && f > 0 && f >= pol.Fragmentation && m.DBSize >= pol.MinDBSize
		if reclaim || byPolicy {
			if !m.Reachable {
				return Step{Action: Wait, Reason: label(m) + " is due but does not answer"}
			}
			due = append(due, m)
		}
	}
	if len(due) == 0 && stuck != "" {
		return Step{Action: Wait, Reason: "learner " + stuck + " raised NOSPACE: etcd does not defragment a learner, and nico does not promote one that does not serve; an operator removes it (etcdctl member remove) and disarms the alarm (etcdctl alarm disarm)"}
	}
	if len(due) == 0 && obs.Active != "" {
		return Step{Action: Wait, Reason: "operation " + obs.Active + " is in flight"}
	}
	if len(due) == 0 {
		return Step{Action: None, Reason: "no member is fragmented beyond the policy"}
	}
	sort.SliceStable(due, func(i, j int) bool {
		li, lj := due[i].ID == obs.Leader, due[j].ID == obs.Leader
		if li != lj {
			return lj
		}
		if ai, aj := noSpace[due[i].ID], noSpace[due[j].ID]; ai != aj {
			return ai
		}
		fi, fj := Fragmentation(due[i]), Fragmentation(due[j])
		if fi != fj {
			return fi > fj
		}
		return label(due[i]) < label(due[j])
	})
	m := due[0]
	// Under NOSPACE with every voter serving (two voters: a cluster
	// growing to three), the alarmed member is defragmented anyway, as a
	// single voter is: writes are refused already, and there is no other
	// way back.
	underNoSpace := noSpace[m.ID] || (len(noSpace) > 0 && shipsFile(obs, m) && !obs.Done[m.ID])
	noWayElse := underNoSpace && healthy == voters
	if !m.Learner && voters > 1 && healthy-1 < voters/2+1 && !noWayElse {
		return Step{Action: Wait, Reason: fmt.Sprintf("defragmenting %s would leave %d of %d voters serving, below quorum", label(m), healthy-1, voters)}
	}
	why := fmt.Sprintf("%.0f%% of %d bytes is free", 100*Fragmentation(m), m.DBSize)
	switch {
	case noSpace[m.ID]:
		why += ", NOSPACE raised"
	case underNoSpace:
		why += ", under NOSPACE: a joiner's snapshot is the leader's file"
	}
	if m.ID == obs.Leader {
		why += ", the leader last"
	}
	return Step{Action: Defrag, Member: m, Reason: why}
}

// NoSpaceRefrag is the fragmentation at which a member under NOSPACE,
// already defragmented since its alarm, is defragmented again: space freed
// since (data deleted, history compacted) may bring it below its quota.
const NoSpaceRefrag = 0.2

// Disarm returns the members whose NOSPACE alarm may be disarmed: those
// that were defragmented since the alarm (defragged) and whose database is
// now below its quota. A member with no known quota is left armed. None is
// while a voter nico runs that answers was not defragmented in the
// episode: the disarm lets a held join go on, and its learner's snapshot
// is the leader's file.
func Disarm(obs Observed, defragged map[api.MemberID]bool) []api.MemberID {
	byID := map[api.MemberID]etcdadmin.MemberStatus{}
	for _, m := range obs.Members {
		byID[m.ID] = m
		if shipsFile(obs, m) && !defragged[m.ID] {
			return nil
		}
	}
	var out []api.MemberID
	for _, a := range obs.Alarms {
		if a.Type != etcdadmin.AlarmNoSpace || !defragged[a.Member] {
			continue
		}
		m, ok := byID[a.Member]
		if ok && m.Reachable && m.DBSizeQuota > 0 && m.DBSize < m.DBSizeQuota {
			out = append(out, a.Member)
		}
	}
	return out
}

// shipsFile tells whether m is a voter nico runs that answers: one that
// may lead, and send its database file to a learner as its snapshot.
func shipsFile(obs Observed, m etcdadmin.MemberStatus) bool {
	return !m.Learner && !obs.External[m.ID] && m.Reachable
}

// serving tells whether m answered and reported no error but an active
// alarm: under NOSPACE every member's status reports the alarm, and each
// still serves reads and raft, so it counts for quorum.
func serving(m etcdadmin.MemberStatus) bool {
	if !m.Reachable {
		return false
	}
	for _, e := range m.Errors {
		if !strings.Contains(e, "alarm:") {
			return false
		}
	}
	return true
}

package defrag

import (
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
)

const mib = 1 << 20

func m(id api.MemberID, name string, size, inUse int64) etcdadmin.MemberStatus {
	return etcdadmin.MemberStatus{ID: id, Name: name, Reachable: true, DBSize: size, DBSizeInUse: inUse, DBSizeQuota: 8 * mib}
}

func TestPlan(t *testing.T) {
	pol := Policy{Fragmentation: 0.5, MinDBSize: 4 * mib}
	frag := func(id api.MemberID, name string) etcdadmin.MemberStatus { return m(id, name, 6*mib, 2*mib) } // 67%
	tidy := func(id api.MemberID, name string) etcdadmin.MemberStatus { return m(id, name, 6*mib, 5*mib) } // 17%
	sick := func(s etcdadmin.MemberStatus) etcdadmin.MemberStatus { s.Reachable, s.Err = false, "timeout"; return s }
	learner := func(s etcdadmin.MemberStatus) etcdadmin.MemberStatus { s.Learner = true; return s }
	// alarmed is what etcd's Status reports on every member while an alarm stands.
	alarmed := func(s etcdadmin.MemberStatus) etcdadmin.MemberStatus {
		s.Errors = []string{"memberID:2 alarm:NOSPACE "}
		return s
	}
	broken := func(s etcdadmin.MemberStatus) etcdadmin.MemberStatus {
		s.Errors = []string{"etcdserver: no leader"}
		return s
	}
	for _, tc := range []struct {
		name   string
		obs    Observed
		pol    Policy
		action Action
		member string
		reason string
	}{
		{"policy off", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a")}}, Policy{}, None, "", "defragmentation is off (spec.policy.defragFragmentation is 0)"},
		{"nothing due", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1}, pol, None, "", "no member is fragmented beyond the policy"},
		{"small database skipped", Observed{Members: []etcdadmin.MemberStatus{m(1, "a", 2*mib, 1), tidy(2, "b"), tidy(3, "c")}, Leader: 1}, pol, None, "", "no member is fragmented beyond the policy"},
		{"op in flight", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a")}, Active: "join-cp-4"}, pol, Wait, "", "operation join-cp-4 is in flight"},
		{"a follower first, the leader last", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), frag(2, "b"), tidy(3, "c")}, Leader: 1}, pol, Defrag, "b", "67% of 6291456 bytes is free"},
		{"the leader once alone", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1}, pol, Defrag, "a", "67% of 6291456 bytes is free, the leader last"},
		{"most fragmented follower first", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), frag(2, "b"), m(3, "c", 6*mib, mib)}, Leader: 1}, pol, Defrag, "c", "83% of 6291456 bytes is free"},
		{"name breaks ties", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), frag(3, "c"), frag(2, "b")}, Leader: 1}, pol, Defrag, "b", "67% of 6291456 bytes is free"},
		{"a due member does not answer", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), sick(frag(2, "b")), frag(3, "c")}, Leader: 1}, pol, Wait, "", "b is due but does not answer"},
		{"quorum at risk", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), sick(tidy(2, "b")), frag(3, "c")}, Leader: 1}, pol, Wait, "", "defragmenting c would leave 1 of 3 voters serving, below quorum"},
		{"a learner does not vote", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), sick(frag(3, "c")), learner(tidy(4, "d"))}, Leader: 1}, pol, Wait, "", "c is due but does not answer"},
		{"a learner is not defragmented (etcd refuses)", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), tidy(3, "c"), learner(frag(4, "d"))}, Leader: 1}, pol, None, "", "no member is fragmented beyond the policy"},
		{"NOSPACE on a learner, voters done", Observed{Members: []etcdadmin.MemberStatus{alarmed(tidy(1, "a")), alarmed(tidy(2, "b")), alarmed(learner(frag(4, "d")))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 4, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{1: true, 2: true}}, Policy{}, Wait, "", "learner d raised NOSPACE: etcd does not defragment a learner, and nico does not promote one that does not serve; an operator removes it (etcdctl member remove) and disarms the alarm (etcdctl alarm disarm)"},
		{"NOSPACE on a learner, a voter first", Observed{Members: []etcdadmin.MemberStatus{alarmed(tidy(1, "a")), alarmed(tidy(2, "b")), alarmed(tidy(3, "c")), alarmed(learner(frag(4, "d")))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 4, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{1: true, 2: true}}, Policy{}, Defrag, "c", "17% of 6291456 bytes is free, under NOSPACE: a joiner's snapshot is the leader's file"},
		{"one voter", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a")}, Leader: 1}, pol, Defrag, "a", "67% of 6291456 bytes is free, the leader last"},
		{"NOSPACE below the ratio", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, pol, Defrag, "b", "17% of 6291456 bytes is free, NOSPACE raised"},
		{"NOSPACE with nothing counted free yet", Observed{Members: []etcdadmin.MemberStatus{m(1, "a", 6*mib, 6*mib)}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 1, Type: etcdadmin.AlarmNoSpace}}}, pol, Defrag, "a", "0% of 6291456 bytes is free, NOSPACE raised, the leader last"},
		{"NOSPACE after its defrag", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{2: true}}, pol, Defrag, "c", "17% of 6291456 bytes is free, under NOSPACE: a joiner's snapshot is the leader's file"},
		{"NOSPACE after every voter's defrag", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{1: true, 2: true, 3: true}}, pol, None, "", "no member is fragmented beyond the policy"},
		{"NOSPACE: the leader's file last", Observed{Members: []etcdadmin.MemberStatus{alarmed(frag(1, "a")), alarmed(tidy(2, "b"))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{2: true}}, Policy{}, Defrag, "a", "67% of 6291456 bytes is free, under NOSPACE: a joiner's snapshot is the leader's file, the leader last"},
		{"NOSPACE: the alarmed follower before the others", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), m(2, "b", 6*mib, 6*mib), frag(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, Policy{}, Defrag, "b", "0% of 6291456 bytes is free, NOSPACE raised"},
		{"NOSPACE: a learner, a voter that does not answer and an external member are not due", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), tidy(2, "b"), sick(frag(3, "c")), learner(frag(4, "d")), frag(5, "ext")}, Leader: 1, External: map[api.MemberID]bool{5: true}, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{1: true, 2: true}}, Policy{}, None, "", "no member is fragmented beyond the policy"},
		{"NOSPACE after its defrag, space freed since", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), frag(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{2: true}}, pol, Defrag, "b", "67% of 6291456 bytes is free, NOSPACE raised"},
		{"NOSPACE with the policy off", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, Policy{}, Defrag, "b", "17% of 6291456 bytes is free, NOSPACE raised"},
		{"NOSPACE with the policy off, done", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{2: true}}, Policy{}, Defrag, "c", "17% of 6291456 bytes is free, under NOSPACE: a joiner's snapshot is the leader's file"},
		{"NOSPACE reported by every member's status", Observed{Members: []etcdadmin.MemberStatus{alarmed(tidy(1, "a")), alarmed(tidy(2, "b")), alarmed(tidy(3, "c"))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, Policy{}, Defrag, "b", "17% of 6291456 bytes is free, NOSPACE raised"},
		{"another error is not serving", Observed{Members: []etcdadmin.MemberStatus{alarmed(tidy(1, "a")), alarmed(tidy(2, "b")), broken(tidy(3, "c"))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, Policy{}, Wait, "", "defragmenting b would leave 1 of 3 voters serving, below quorum"},
		{"NOSPACE on one of two voters", Observed{Members: []etcdadmin.MemberStatus{alarmed(tidy(1, "a")), alarmed(tidy(2, "b"))}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, Policy{}, Defrag, "b", "17% of 6291456 bytes is free, NOSPACE raised"},
		{"two voters, no NOSPACE", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), frag(2, "b")}, Leader: 1}, pol, Wait, "", "defragmenting b would leave 1 of 2 voters serving, below quorum"},
		{"NOSPACE beside an operation in flight", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Active: "join-cp-4", Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}, pol, Defrag, "b", "17% of 6291456 bytes is free, NOSPACE raised"},
		{"NOSPACE done beside an operation in flight", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Active: "join-cp-4", Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{2: true}}, pol, Defrag, "c", "17% of 6291456 bytes is free, under NOSPACE: a joiner's snapshot is the leader's file"},
		{"NOSPACE all done beside an operation in flight", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), tidy(2, "b"), tidy(3, "c")}, Leader: 1, Active: "join-cp-4", Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}, Done: map[api.MemberID]bool{1: true, 2: true, 3: true}}, pol, Wait, "", "operation join-cp-4 is in flight"},
		{"an external member is not nico's to defragment", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), frag(2, "ext"), tidy(3, "c")}, Leader: 1, External: map[api.MemberID]bool{2: true}}, pol, None, "", "no member is fragmented beyond the policy"},
		{"an external member counts for quorum", Observed{Members: []etcdadmin.MemberStatus{tidy(1, "a"), sick(tidy(2, "ext")), frag(3, "c")}, Leader: 1, External: map[api.MemberID]bool{2: true}}, pol, Wait, "", "defragmenting c would leave 1 of 3 voters serving, below quorum"},
		{"CORRUPT waits", Observed{Members: []etcdadmin.MemberStatus{frag(1, "a"), frag(2, "b")}, Leader: 1, Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmCorrupt}}}, pol, Wait, "", "CORRUPT alarm on 0000000000000002: an operator must act"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Plan(tc.obs, tc.pol)
			if s.Action != tc.action || s.Reason != tc.reason || (tc.member != "" && s.Member.Name != tc.member) {
				t.Errorf("Plan = %s (member %q), want %s %q: %q", s, s.Member.Name, tc.action, tc.member, tc.reason)
			}
		})
	}
}

func TestDisarm(t *testing.T) {
	below, above := m(1, "a", 2*mib, mib), m(2, "b", 9*mib, 8*mib)
	noQuota := m(3, "c", 2*mib, mib)
	noQuota.DBSizeQuota = 0
	undone := m(4, "d", mib, mib)
	undone.Learner = true
	obs := Observed{Members: []etcdadmin.MemberStatus{below, above, noQuota, undone}, Alarms: []etcdadmin.Alarm{
		{Member: 1, Type: etcdadmin.AlarmNoSpace}, {Member: 2, Type: etcdadmin.AlarmNoSpace}, {Member: 3, Type: etcdadmin.AlarmNoSpace},
		{Member: 4, Type: etcdadmin.AlarmNoSpace}, {Member: 1, Type: etcdadmin.AlarmCorrupt},
	}}
	got := Disarm(obs, map[api.MemberID]bool{1: true, 2: true, 3: true})
	if !slices.Equal(got, []api.MemberID{1}) {
		t.Errorf("Disarm = %v, want [1]: below quota after a defrag; not above quota, not without a quota, not without a defrag, never CORRUPT", got)
	}
}

// TestDisarmWaitsForEveryVoter: the disarm lets a held join go on, and its
// learner's snapshot is the leader's file: nothing is disarmed while a
// voter nico runs that answers was not defragmented in the episode (a
// member started before the declared quota raises nothing as its file
// grows past it). A learner, a voter that does not answer and an external
// member do not hold it.
func TestDisarmWaitsForEveryVoter(t *testing.T) {
	leader, alarmed := m(1, "a", 17*mib, 14*mib), m(2, "b", 2*mib, mib)
	leader.DBSizeQuota = 2048 * mib // started before the declared quota
	learner, down, ext := m(3, "c", 17*mib, mib), m(4, "d", 0, 0), m(5, "e", 17*mib, mib)
	learner.Learner, down.Reachable = true, false
	obs := Observed{Members: []etcdadmin.MemberStatus{leader, alarmed, learner, down, ext}, External: map[api.MemberID]bool{5: true},
		Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}}}
	for _, tc := range []struct {
		name      string
		defragged map[api.MemberID]bool
		want      []api.MemberID
	}{
		{"the leader not yet defragmented", map[api.MemberID]bool{2: true}, nil},
		{"the leader defragmented", map[api.MemberID]bool{1: true, 2: true}, []api.MemberID{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Disarm(obs, tc.defragged); !slices.Equal(got, tc.want) {
				t.Errorf("Disarm = %v, want %v", got, tc.want)
			}
		})
	}
}

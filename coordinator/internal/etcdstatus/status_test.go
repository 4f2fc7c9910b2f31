package etcdstatus

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(name, peer string, cp bool) *api.Node {
	n := &api.Node{Metadata: api.ObjectMeta{Name: name}}
	n.Spec.PeerURL = peer
	if cp {
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
	}
	return n
}

func mem(id api.MemberID, name string, leader api.MemberID, version string) etcdadmin.MemberStatus {
	return etcdadmin.MemberStatus{
		ID: id, Name: name, PeerURLs: []string{"https://" + name + ":2380"}, ClientURLs: []string{"https://" + name + ":2379"},
		Reachable: true, Version: version, Leader: leader, RaftTerm: 2, RaftIndex: 100, AppliedIndex: 100, DBSize: 4096, DBSizeInUse: 2048,
	}
}

func cond(st api.EtcdClusterStatus, typ string) api.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.Condition{}
}

func TestFaultTolerance(t *testing.T) {
	for _, tc := range []struct{ voters, healthy, want int }{
		{0, 0, 0}, {1, 1, 0}, {1, 0, 0}, {2, 2, 0}, {3, 3, 1}, {3, 2, 0}, {3, 1, 0},
		{4, 4, 1}, {5, 5, 2}, {5, 4, 1}, {5, 3, 0}, {7, 7, 3}, {7, 5, 1},
	} {
		if got := FaultTolerance(tc.voters, tc.healthy); got != tc.want {
			t.Errorf("FaultTolerance(%d voters, %d healthy) = %d, want %d", tc.voters, tc.healthy, got, tc.want)
		}
	}
}

func TestBuild(t *testing.T) {
	nodes := []*api.Node{
		node("cp-1", "https://cp-1:2380", true), node("cp-2", "https://cp-2:2380", true),
		node("cp-3", "https://cp-3:2380", true), node("cp-4", "https://cp-4:2380", true),
		node("dp-1", "", false),
	}
	three := []etcdadmin.MemberStatus{mem(1, "cp-1", 1, "3.6.16"), mem(2, "cp-2", 1, "3.6.16"), mem(3, "cp-3", 1, "3.6.16")}
	for _, tc := range []struct {
		name  string
		in    Input
		check func(t *testing.T, st api.EtcdClusterStatus)
	}{
		{"three voters and a standby", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: three, Nodes: nodes, Alive: map[string]bool{"cp-4": true}}, func(t *testing.T, st api.EtcdClusterStatus) {
			if st.Voters != 3 || st.FaultTolerance != 1 || st.Leader != "cp-1" || st.ClusterVersion != "3.6.0" {
				t.Errorf("voters %d ft %d leader %q version %q", st.Voters, st.FaultTolerance, st.Leader, st.ClusterVersion)
			}
			if len(st.Members) != 4 || st.Members[3].Role != api.RoleStandby || !st.Members[3].Healthy || st.Members[0].Role != api.RoleVoter || !st.Members[0].Leader {
				t.Errorf("members %+v", st.Members)
			}
			if st.Members[1].DBSize != 4096 || st.Members[1].DBSizeInUse != 2048 || st.Members[1].RaftTerm != 2 || st.Members[1].Node != "cp-2" {
				t.Errorf("member %+v", st.Members[1])
			}
			for _, c := range []string{api.CondHealthy, api.CondReconciled} {
				if !cond(st, c).Status {
					t.Errorf("%s false: %+v", c, cond(st, c))
				}
			}
			if cond(st, api.CondVersionSkew).Status {
				t.Errorf("skew: %+v", cond(st, api.CondVersionSkew))
			}
		}},
		{"an unreachable voter", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: func() []etcdadmin.MemberStatus {
			ms := append([]etcdadmin.MemberStatus(nil), three...)
			ms[2] = etcdadmin.MemberStatus{ID: 3, Name: "cp-3", PeerURLs: ms[2].PeerURLs, ClientURLs: ms[2].ClientURLs, Err: "deadline exceeded"}
			return ms
		}(), Nodes: nodes[:3]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if st.FaultTolerance != 0 || st.Members[2].Healthy || st.Members[2].Message != "deadline exceeded" {
				t.Errorf("ft %d member %+v", st.FaultTolerance, st.Members[2])
			}
			if c := cond(st, api.CondHealthy); c.Status || c.Reason != "UnhealthyVoters" || c.Message != "cp-3" {
				t.Errorf("healthy %+v", c)
			}
		}},
		{"a learner and an op in flight", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Active: "join-cp-3", Members: func() []etcdadmin.MemberStatus {
			ms := append([]etcdadmin.MemberStatus(nil), three...)
			ms[2].Learner, ms[2].RaftIndex = true, 50
			return ms
		}(), Nodes: nodes[:3], Progress: map[api.MemberID]Progress{3: {Fraction: 0.5, ETA: 2 * time.Second}}}, func(t *testing.T, st api.EtcdClusterStatus) {
			m := st.Members[2]
			if m.Role != api.RoleLearner || m.Progress != 0.5 || m.ETA != api.Duration(2*time.Second) || st.Voters != 2 || st.FaultTolerance != 0 {
				t.Errorf("learner %+v voters %d", m, st.Voters)
			}
			if c := cond(st, api.CondReconciled); c.Status || c.Reason != "OperationInFlight" {
				t.Errorf("reconciled %+v", c)
			}
			if !cond(st, api.CondHealthy).Status {
				t.Errorf("a learner made the cluster unhealthy: %+v", cond(st, api.CondHealthy))
			}
		}},
		{"too few voters", Input{Spec: api.EtcdClusterSpec{Voters: 5}, Members: three, Nodes: nodes}, func(t *testing.T, st api.EtcdClusterStatus) {
			if c := cond(st, api.CondReconciled); c.Status || c.Reason != "VoterCount" || c.Message != "3 voters, spec.voters is 5" {
				t.Errorf("reconciled %+v", c)
			}
		}},
		{"an external learner and a declared one", Input{Spec: api.EtcdClusterSpec{Voters: 3, Members: []api.EtcdMemberSpec{
			{Name: "ext-1", Kind: api.MemberExternal, PeerURLs: []string{"https://ext-1:2380"}},
			{Name: "ext-2", Kind: api.MemberExternal, PeerURLs: []string{"https://ext-2:2380"}},
		}}, Members: append(append([]etcdadmin.MemberStatus(nil), three[:2]...), func() etcdadmin.MemberStatus {
			m := mem(9, "ext-1", 1, "3.6.16")
			m.Learner = true
			return m
		}()), Nodes: nodes[:2]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if len(st.Members) != 4 || st.Members[2].Role != api.RoleExternal || st.Members[3].Role != api.RoleExternal || st.Members[3].ID != 0 {
				t.Errorf("members %+v", st.Members)
			}
			if c := cond(st, api.CondReconciled); c.Status || c.Reason != "VoterCount" {
				t.Errorf("reconciled %+v", c)
			}
			if st.Voters != 2 {
				t.Errorf("voters %d", st.Voters)
			}
		}},
		{"external members pending", Input{Spec: api.EtcdClusterSpec{Voters: 3, Members: []api.EtcdMemberSpec{
			{Name: "ext-2", Kind: api.MemberExternal, PeerURLs: []string{"https://ext-2:2380"}},
		}}, Members: three, Nodes: nodes[:3]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if c := cond(st, api.CondReconciled); c.Status || c.Reason != "ExternalPending" || c.Message != "external members not voters yet: ext-2" {
				t.Errorf("reconciled %+v", c)
			}
		}},
		{"alarms", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: three, Nodes: nodes[:3], Alarms: []etcdadmin.Alarm{{Member: 2, Type: etcdadmin.AlarmNoSpace}, {Member: 3, Type: etcdadmin.AlarmCorrupt}}}, func(t *testing.T, st api.EtcdClusterStatus) {
			if len(st.Alarms) != 2 || st.Alarms[0] != "CORRUPT on cp-3" || st.Alarms[1] != "NOSPACE on cp-2" {
				t.Errorf("alarms %v", st.Alarms)
			}
			if st.Members[1].Healthy || st.Members[1].Alarms[0] != "NOSPACE" || st.FaultTolerance != 0 {
				t.Errorf("member %+v ft %d", st.Members[1], st.FaultTolerance)
			}
			if c := cond(st, api.CondHealthy); c.Status || c.Reason != "Alarm" {
				t.Errorf("healthy %+v", c)
			}
		}},
		{"mixed versions", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: func() []etcdadmin.MemberStatus {
			ms := append([]etcdadmin.MemberStatus(nil), three...)
			ms[0].Version = "3.7.3"
			return ms
		}(), Nodes: nodes[:3]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if c := cond(st, api.CondVersionSkew); !c.Status || c.Message != "members run 3.6.16, 3.7.3" {
				t.Errorf("skew %+v", c)
			}
			if st.ClusterVersion != "3.6.0" {
				t.Errorf("cluster version %q", st.ClusterVersion)
			}
		}},
		{"not spec.version", Input{Spec: api.EtcdClusterSpec{Voters: 3, Version: "3.7.3"}, Members: three, Nodes: nodes[:3]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if c := cond(st, api.CondVersionSkew); !c.Status || c.Reason != "NotSpecVersion" {
				t.Errorf("skew %+v", c)
			}
		}},
		{"no leader", Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: func() []etcdadmin.MemberStatus {
			ms := append([]etcdadmin.MemberStatus(nil), three...)
			for i := range ms {
				ms[i].Leader = 0
			}
			return ms
		}(), Nodes: nodes[:3]}, func(t *testing.T, st api.EtcdClusterStatus) {
			if c := cond(st, api.CondHealthy); c.Status || c.Reason != "NoLeader" || st.Leader != "" {
				t.Errorf("healthy %+v leader %q", c, st.Leader)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = t0
			tc.check(t, Build(tc.in))
		})
	}
}

// TestBuildKeepsSince: a condition whose status holds keeps the time it
// became so; one that flips takes now.
func TestBuildKeepsSince(t *testing.T) {
	ms := []etcdadmin.MemberStatus{mem(1, "cp-1", 1, "3.6.16")}
	in := Input{Spec: api.EtcdClusterSpec{Voters: 1}, Members: ms, Now: t0}
	first := Build(in)
	in.Prev, in.Now = first, t0.Add(time.Minute)
	in.Spec.Voters = 3
	second := Build(in)
	if got := cond(second, api.CondHealthy).Since; !got.Equal(t0) {
		t.Errorf("Healthy since %v, want %v", got, t0)
	}
	if got := cond(second, api.CondReconciled).Since; !got.Equal(in.Now) {
		t.Errorf("Reconciled since %v, want %v", got, in.Now)
	}
}

// TestBuildDataDirFull: a member whose node reports its data dir full is
// unhealthy with the free space in its message, and its quota is shown.
func TestBuildDataDirFull(t *testing.T) {
	full := node("cp-3", "https://cp-3:2380", true)
	full.Status.DataDir = &api.DataDirStatus{FreeBytes: 4096, SizeBytes: 256 << 20, Full: true}
	nodes := []*api.Node{node("cp-1", "https://cp-1:2380", true), node("cp-2", "https://cp-2:2380", true), full}
	ms := []etcdadmin.MemberStatus{mem(1, "cp-1", 1, "3.6.16"), mem(2, "cp-2", 1, "3.6.16"), mem(3, "cp-3", 1, "3.6.16")}
	ms[2].DBSizeQuota = 16 << 20
	st := Build(Input{Spec: api.EtcdClusterSpec{Voters: 3}, Members: ms, Nodes: nodes, Now: t0})
	got := st.Members[2]
	if got.Name != "cp-3" || got.Healthy || got.Message != "data dir full: 4096 bytes free of 268435456" || got.DBSizeQuota != 16<<20 {
		t.Fatalf("cp-3: %+v", got)
	}
	if st.FaultTolerance != 0 || !st.Members[0].Healthy {
		t.Fatalf("fault tolerance %d, cp-1 %+v", st.FaultTolerance, st.Members[0])
	}
}

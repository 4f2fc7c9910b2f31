package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/internal/defrag"
	"github.com/homystack/nico/coordinator/internal/versionroll"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/switchguard"
)

func TestSlotWantsExpire(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	w := newSlotWants(func() time.Time { return now }, time.Second)
	if got := w.wanted(); got != "" {
		t.Fatalf("wanted %q with no want set", got)
	}
	w.set("membership", "membership: StartJoin cp-9")
	w.set("switch-guard", "switch of cp-2")
	if got := w.wanted(); got != "membership: StartJoin cp-9; switch of cp-2" {
		t.Fatalf("wanted %q", got)
	}
	w.set("switch-guard", "")
	now = now.Add(9 * time.Second)
	if got := w.wanted(); got != "membership: StartJoin cp-9" {
		t.Fatalf("wanted %q after the switch guard's want was cleared", got)
	}
	now = now.Add(2 * time.Second)
	if got := w.wanted(); got != "" {
		t.Fatalf("wanted %q after its controller stopped setting it for 11s", got)
	}
	var none *slotWants
	none.set("membership", "x")
	if got := none.wanted(); got != "" {
		t.Fatalf("a nil slotWants wanted %q", got)
	}
}

// TestControllersSayWhatWaitsForTheSlot: while another kind of operation
// holds the slot, the membership controller and the switch guard say what
// they would do with it; holding it themselves, or with nothing to do,
// they say nothing.
func TestControllersSayWhatWaitsForTheSlot(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).UTC()
	rolloutStep := api.NewOperation("rollout-r1-1")
	rolloutStep.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: "dp-1,dp-2", Request: "r1"}
	join := api.NewOperation("join-n9-1")
	join.Spec = api.OperationSpec{Type: api.OpJoin, Node: "n9"}

	var members []membership.Member
	obs := membership.Observed{Alive: map[string]bool{}, Cluster: api.EtcdClusterSpec{Voters: 5}}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		m := membership.Member{ID: api.MemberID(i), Name: name, Node: name, Healthy: true, Leader: i == 1, RaftIndex: 100,
			PeerURLs: []string{fmt.Sprintf("http://10.0.0.%d:2380", i)}, ClientURLs: []string{fmt.Sprintf("http://10.0.0.%d:2379", i)}}
		members = append(members, m)
		n := api.NewNode(name)
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		n.Spec.PeerURL, n.Spec.ClientURL = m.PeerURLs[0], m.ClientURLs[0]
		obs.Nodes = append(obs.Nodes, n)
		obs.Alive[name] = true
	}
	obs.Members = members
	idle := obs
	n9 := api.NewNode("n9")
	n9.Spec.Roles, n9.Spec.PeerURL = []api.Role{api.RoleControlPlane}, "http://10.0.0.9:2380"
	obs.Nodes = append(obs.Nodes, n9)
	obs.Alive["n9"] = true
	j := api.NewJoinRequest("n9")
	j.Metadata.CreatedAt = now
	j.Spec = api.JoinRequestSpec{Node: "n9", PeerURL: "http://10.0.0.9:2380", ClientURL: "http://10.0.0.9:2379", Attempt: 1}
	obs.Joins = []*api.JoinRequest{j}

	pol := membership.Policy{}
	want := func(o membership.Observed, active *api.Operation) string {
		o.Active = active
		return membershipWant(o, pol, now, membership.Plan(o, pol, now))
	}
	if got := want(obs, rolloutStep); !strings.Contains(got, "StartJoin") {
		t.Errorf("a join asked while a rollout step holds the slot: want %q, want a StartJoin", got)
	}
	if got := want(obs, join); got != "" {
		t.Errorf("while its own join holds the slot, the membership controller wants %q", got)
	}
	if got := want(obs, nil); got != "" {
		t.Errorf("with the slot free, the membership controller wants %q", got)
	}
	if got := want(idle, rolloutStep); got != "" {
		t.Errorf("with nothing to do, the membership controller wants %q", got)
	}

	ask := api.NewSwitchRequest("n2")
	ask.Spec = api.SwitchRequestSpec{Attempt: "a1", Toplevel: "/nix/store/new-n2", Action: "switch", RequestedAt: now}
	sw := switchguard.Observed{Members: members, Requests: []*api.SwitchRequest{ask}, Active: rolloutStep}
	if got := switchWant(sw, now); got != "switch of n2" {
		t.Errorf("a host asks to switch while a rollout step holds the slot: want %q, want \"switch of n2\"", got)
	}
	sw.Active = nil
	if got := switchWant(sw, now); got != "" {
		t.Errorf("with the slot free, the switch guard wants %q", got)
	}
	sw.Active, sw.Requests = rolloutStep, nil
	if got := switchWant(sw, now); got != "" {
		t.Errorf("with nothing asked, the switch guard wants %q", got)
	}
}

// TestMaintenanceSaysWhatWaitsForTheSlot: a defragmentation due and an
// etcd version step due say they wait while another operation holds the
// slot, and say nothing while they hold it, with the slot free, or with
// nothing due.
func TestMaintenanceSaysWhatWaitsForTheSlot(t *testing.T) {
	const mib = 1 << 20
	member := func(id api.MemberID, name string, inUse int64) etcdadmin.MemberStatus {
		return etcdadmin.MemberStatus{ID: id, Name: name, Reachable: true, DBSize: 6 * mib, DBSizeInUse: inUse, DBSizeQuota: 8 * mib}
	}
	pol := defrag.Policy{Fragmentation: 0.5, MinDBSize: 4 * mib}
	fragmented := defrag.Observed{Members: []etcdadmin.MemberStatus{member(1, "a", 5*mib), member(2, "b", 2*mib), member(3, "c", 5*mib)}, Leader: 1}
	tidy := defrag.Observed{Members: []etcdadmin.MemberStatus{member(1, "a", 5*mib), member(2, "b", 5*mib), member(3, "c", 5*mib)}, Leader: 1}
	for _, tc := range []struct {
		name   string
		obs    defrag.Observed
		active string
		want   string
	}{
		{"due while a rollout step holds the slot", fragmented, "rollout-r1-3", "defragmentation: Defrag b"},
		{"the slot free", fragmented, "", ""},
		{"nothing due", tidy, "rollout-r1-3", ""},
	} {
		tc.obs.Active = tc.active
		if got := defragWant(tc.obs, pol); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("defragmentation, %s: got %q, want one starting %q", tc.name, got, tc.want)
		}
	}

	now := time.Unix(1_700_000_000, 0).UTC()
	rolling := versionroll.Observed{Target: "3.7.3", Cluster: "3.6.0"}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("cp-%d", i)
		rolling.Members = append(rolling.Members, versionroll.Member{Name: name, Node: name, ID: api.MemberID(i), ClientURL: "http://" + name,
			Voter: true, Healthy: true, Alive: true, Leader: i == 1, Version: "3.6.16", StorageVersion: "3.6.0"})
	}
	settled := rolling
	settled.Target = ""
	for _, tc := range []struct {
		name   string
		obs    versionroll.Observed
		active string
		want   string
	}{
		{"due while a rollout step holds the slot", rolling, "rollout-r1-3", "etcd version: SetVersion cp-"},
		{"its own step holds the slot", rolling, versionroll.OpPrefix + "cp-2-3.7.3", ""},
		{"the slot free", rolling, "", ""},
		{"nothing to roll", settled, "rollout-r1-3", ""},
	} {
		tc.obs.ActiveOp = tc.active
		if got := versionWant(tc.obs, now); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("etcd version, %s: got %q, want one starting %q", tc.name, got, tc.want)
		}
	}
}

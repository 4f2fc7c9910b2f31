package statuspage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// TestRenderPage renders the page from a real etcd with a fleet in the
// store: members from etcd's member list (health and index asked of the
// members, no EtcdCluster status row yet), nodes with liveness and
// generation, the join in flight with its journal, the rollout with its
// current node, ETA and timeline, the pool and the Kubernetes cluster.
func TestRenderPage(t *testing.T) {
	c, st := newStore(t, 1)
	member := c.Members[0].Name
	fleet(t, st, member)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := Read(ctx, st, t0.Add(50*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Problems) > 0 {
		t.Errorf("problems: %v", v.Problems)
	}
	b, err := RenderPage(v)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`<tr id="member-` + member + `" data-role="voter" data-health="healthy">`,
		`★ leader`,
		`<tr id="node-` + member + `" data-liveness="alive" data-member="voter">`,
		`2 / 3 Applying`,
		`<tr id="node-wk-1" data-liveness="dead"`,
		`title="lease expired"`,
		`<b>Join</b> of <b>cp-2</b> (join-cp-2-1): step <b>Learner</b>`,
		`waiting for cp-2 to start`,
		`<b>demo-v2</b> generation 3: <b>Running</b>, 1/3 nodes`,
		`now on <b>` + member + `</b>`,
		`ETA 1m10s`, // 40 s a node: 30 s left on the current one, 40 s for cp-9
		`<b>wk-1</b>: Done at 2026-12-01 12:00:00Z, 40s`,
		`<b>cp-9</b> (control plane): Pending`,
		`<tr id="pool-workers"><td>workers</td><td>3</td><td>3</td><td>2</td><td>1</td>`,
		`<tr id="claim-etcd"><td>etcd</td><td>workers</td><td><span>workers-etcd-0 on hv-1 (rack-a) Running</span>`,
		`title="losing rack-a would lose 2 of 3 voters (quorum 2)">Spread=false</span>`,
		`fault tolerance 0 · etcd 3.6.0`,
		`<tr id="kubernetes-prod" data-phase="Provisioning">`,
		`<td>- / 1.37.2</td>`,
		`0/1 ready`,
		`kube-apiserver 0/1`,
		`APIServerReady=False (NotAnswering)`,
		`rollout prod-1`,
		`new EventSource("events")`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") && strings.Contains(page, "<script src") || strings.Contains(page, "<link") {
		t.Error("page loads an external asset")
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("page:\n%s", page)
	}
}

// TestMembersFromEtcdClusterStatus: when the leader's EtcdCluster status
// has a member, its health, index and message are shown (without asking
// the member), the role still comes from etcd's member list, a learner
// shows the status's progress and ETA, and a standby the status names is
// listed too.
func TestMembersFromEtcdClusterStatus(t *testing.T) {
	c, st := newStore(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := st.Client().MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Status.Members = []api.EtcdMemberStatus{
		{Name: c.Members[0].Name, ID: api.MemberID(resp.Members[0].ID), Role: api.RoleLearner, Healthy: false, RaftIndex: 4242, Progress: 0.5, ETA: api.Duration(90 * time.Second), Message: "behind"},
		{Name: "cp-4", Node: "cp-4", Role: api.RoleStandby, Healthy: true},
	}
	put(t, st, ec)
	v, err := Read(ctx, st, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members) != 2 {
		t.Fatalf("members %+v, want the etcd member and the standby", v.Members)
	}
	m := v.Members[0]
	if m.Role != api.RoleVoter || m.Health != "unhealthy" || m.RaftIndex != 4242 || m.Source != "status" || m.Message != "behind" {
		t.Errorf("member %+v: want role voter from etcd, health, index and message from status", m)
	}
	if m.Progress != -1 {
		t.Errorf("a voter shows progress %v, want none", m.Progress)
	}
	if s := v.Members[1]; s.Name != "cp-4" || s.Role != api.RoleStandby || s.Health != "healthy" {
		t.Errorf("standby %+v", s)
	}
	row := MemberRow{Role: api.RoleLearner, Progress: -1}
	row.fromStatus(ec.Status.Members[0])
	b, err := RenderBody(View{Members: []MemberRow{row}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "50% · ETA 1m30s") {
		t.Errorf("learner row lacks its progress and ETA:\n%s", b)
	}
}

// TestStandbyAndRemovedNodes: a standby whose record still names the voter
// it was shows as a standby, and a removed node, whose liveness the leader
// reports dead, shows as removed in a neutral colour, not as a red "dead".
func TestStandbyAndRemovedNodes(t *testing.T) {
	_, st := newStore(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb := node("cp-4", api.MemberVoter)
	sb.Status.Phase, sb.Status.MemberID = api.NodeStandby, 0xdead
	put(t, st, sb)
	gone := node("cp-5", api.MemberVoter)
	gone.Status.Phase = api.NodeRemoved
	put(t, st, gone)
	live := api.NewLiveness()
	live.Status.Nodes = map[string]api.NodeLiveness{
		"cp-4": {State: "alive", Since: t0},
		"cp-5": {State: "dead", Since: t0, Reason: "lease"},
	}
	put(t, st, live)
	v, err := Read(ctx, st, t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderBody(v)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`<tr id="node-cp-4" data-liveness="alive" data-member="standby">`,
		`<td class="role-standby">standby</td>`,
		`<tr id="node-cp-5" data-liveness="removed" data-member="removed">`,
		`<td class="role-removed">removed</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, name := range []string{"cp-4", "cp-5"} {
		_, rest, _ := strings.Cut(page, `<tr id="node-`+name+`"`)
		row, _, _ := strings.Cut(rest, "</tr>")
		if strings.Contains(row, "voter") || strings.Contains(row, `class="bad"`) {
			t.Errorf("%s's row shows a voter or a red cell: %s", name, row)
		}
	}
}

package ctl

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// TestGetNodesStandbyAndRemoved: a standby's record may still name the
// voter it was and a removed node's heartbeat is gone; get nodes shows the
// standby as standby with no member ID and the removed node as removed,
// not dead.
func TestGetNodesStandbyAndRemoved(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	ctx := testCtx(t)
	registerNode(t, st, "cp-1", c.Members[0])
	for name, phase := range map[string]api.NodePhase{"cp-4": api.NodeStandby, "cp-5": api.NodeRemoved} {
		n := api.NewNode(name)
		n.Metadata.CreatedAt = time.Now().Add(-time.Hour)
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		n.Status = api.NodeStatus{Phase: phase, MemberID: 0xdead, MemberState: api.MemberVoter}
		if err := st.Put(ctx, store.NodeKey(name), n); err != nil {
			t.Fatal(err)
		}
	}
	live := api.NewLiveness()
	live.Status.Nodes = map[string]api.NodeLiveness{
		"cp-4": {State: "alive", Since: time.Now()},
		"cp-5": {State: "dead", Since: time.Now(), Reason: "lease"},
	}
	if err := st.Put(ctx, store.LivenessKey, live); err != nil {
		t.Fatal(err)
	}
	r := run(t, c.Endpoints(), "get", "nodes")
	r.want(t, ExitOK, nil, nil)
	rows := rowsByName(r.stdout)
	// NAME ROLES PHASE MEMBER STATE ALIVE LIVENESS ...
	for name, want := range map[string][]string{
		"cp-4": {"Standby", "-", "standby", "no", "alive"},
		"cp-5": {"Removed", "-", "removed", "no", "removed"},
	} {
		got := rows[name]
		if len(got) < 7 {
			t.Fatalf("row %s = %q", name, got)
		}
		for i, w := range want {
			if got[2+i] != w {
				t.Errorf("row %s column %d = %q, want %q (row %q)", name, 2+i, got[2+i], w, got)
			}
		}
	}
}

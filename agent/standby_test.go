package agent

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/sdnotify/notifytest"
	"github.com/homystack/nico/pkg/store"
)

// TestStandbyIsReadyAndKeepsWaiting: once the leader marks the join
// request Standby, the agent tells systemd it is ready (before, a standby
// never did, and its start timed out once the join showed no progress),
// is healthy for the watchdog, and keeps following its request until it
// is a voter. Meanwhile it applies its desired generation. Its node
// record names no member, though it named the voter it was before.
func TestStandbyIsReadyAndKeepsWaiting(t *testing.T) {
	sock := notifytest.Listen(t)
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	peer, client := etcdtest.URLs(t)
	j := api.NewJoinRequest("cp-4")
	j.Spec = api.JoinRequestSpec{Node: "cp-4", PeerURL: peer, ClientURL: client, Attempt: 1}
	j.Status = api.JoinRequestStatus{Standby: true, Message: "standby: the cluster has 3 of 3 voters"}
	if err := st.Put(ctx, store.JoinKey("cp-4"), j); err != nil {
		t.Fatal(err)
	}
	c := api.NewNixosConfiguration("cp-4")
	c.Spec.Generation = 3
	if err := st.Put(ctx, store.NixosConfigKey("cp-4"), c); err != nil {
		t.Fatal(err)
	}
	// The node was a voter before it was shed to a standby: its record
	// still names that member.
	old := api.NewNode("cp-4")
	old.Status = api.NodeStatus{Phase: api.NodeMember, MemberID: 0xabc, MemberState: api.MemberVoter, ClusterID: 0x1}
	if err := st.Put(ctx, store.NodeKey("cp-4"), old); err != nil {
		t.Fatal(err)
	}
	applier := &recordingApplier{}
	a := New(Config{Name: "cp-4", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client, Applier: applier}, nil, sdnotify.New(), logging.Test(t))
	a.use(st.Client(), st)
	if err := a.node.register(ctx); err != nil {
		t.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() { joined <- a.etcdJoin.run(ctx, nil) }()
	for i := 0; ; i++ {
		if got := sock.Next(t); got == "READY=1" {
			break
		}
		if i > 10 {
			t.Fatal("a standby did not tell systemd it is ready")
		}
	}
	if !a.Healthy() {
		t.Error("a standby is not healthy for the watchdog")
	}
	if m := a.gossip.meta(); m.ClientURL != "" || m.Health != 0 {
		t.Errorf("a standby advertises %+v in gossip, want no member and no health bits", m)
	}
	n := &api.Node{}
	if err := st.Get(ctx, store.NodeKey("cp-4"), n); err != nil {
		t.Fatal(err)
	}
	if n.Status.Phase != api.NodeStandby || n.Status.MemberID != 0 || n.Status.MemberState != api.MemberNone {
		t.Errorf("the standby's node record shows phase %q, member %s %q; want Standby with no member",
			n.Status.Phase, n.Status.MemberID, n.Status.MemberState)
	}
	waitFor(t, 10*time.Second, "the standby applies generation 3", func() bool { return applier.has(3) })
	select {
	case err := <-joined:
		t.Fatalf("the standby stopped waiting: %v", err)
	default:
	}
	if err := st.Get(ctx, store.JoinKey("cp-4"), j); err != nil {
		t.Fatal(err)
	}
	j.Status = api.JoinRequestStatus{Phase: api.JoinJoined, MemberID: 7}
	if err := st.Put(ctx, store.JoinKey("cp-4"), j); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; err != nil {
		t.Fatalf("join = %v, want nil once the request says Joined", err)
	}
}

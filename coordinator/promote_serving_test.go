package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestPromotionWaitsUntilTheLearnerServes: one voter grows to two. The
// joiner's learner catches up (its raft runs on its peer URL) while its
// status, asked at the client URL it published, is not answered (a hold
// in front of its listener), as a member whose publish has not gone
// through. etcd would promote it; the leader does not, since two voters
// of which one serves is below quorum two. Once it answers, it is
// promoted.
func TestPromotionWaitsUntilTheLearnerServes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := etcdtest.Start(t, 1)
	cli := cl.Client(t)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &execHarness{t: t, st: st, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.lead("leader-1")
	t.Cleanup(h.c.admin.Close)
	h.c.admin.SetHealthTimeout(300 * time.Millisecond)
	h.faults = &faultAdmin{next: h.c.admin}
	peer, _ := etcdtest.URLs(t)
	v := cl.Members[0]
	for name, urls := range map[string][2]string{"cp-0": {v.PeerURL, v.ClientURL}, "cp-1": {peer, ""}} {
		n := api.NewNode(name)
		n.Spec = api.NodeSpec{Roles: []api.Role{api.RoleControlPlane}, PeerURL: urls[0], ClientURL: urls[1]}
		h.put(store.NodeKey(name), n)
		if _, err := st.Client().Put(ctx, store.HeartbeatKey(name), ""); err != nil {
			t.Fatal(err)
		}
	}
	j := api.NewJoinRequest("cp-1")
	j.Spec = api.JoinRequestSpec{Node: "cp-1", PeerURL: peer, Attempt: 1}
	h.put(store.JoinKey("cp-1"), j)
	for _, want := range []membership.Action{membership.StartJoin, membership.AddLearner} {
		if step, err := h.pass(); err != nil || step.Action != want {
			t.Fatalf("step %v (%v), want %s", step, err, want)
		}
	}
	if err := st.Get(ctx, store.JoinKey("cp-1"), j); err != nil || j.Status.Phase != api.JoinLearnerAdded {
		t.Fatalf("join request %+v (%v), want the learner added", j.Status, err)
	}
	m := etcdtest.StartHeld(t, "cp-1", peer, j.Status.InitialCluster)
	id := j.Status.MemberID

	// In sync and published: its own listener shows the voter's applied
	// index of after its start, and the member list its client URL.
	if _, err := cli.Put(ctx, "/user/after-start", "x"); err != nil {
		t.Fatal(err)
	}
	lst, err := cli.Status(ctx, v.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the learner in sync and published", func() (bool, string) {
		s, err := cli.Status(ctx, m.ListenURL)
		if err != nil {
			return false, err.Error()
		}
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		published := false
		for _, x := range ms.Members {
			published = published || (x.ID == uint64(id) && len(x.ClientURLs) > 0)
		}
		return s.RaftAppliedIndex >= lst.RaftAppliedIndex && published, fmt.Sprintf("applied %d of %d, published %v", s.RaftAppliedIndex, lst.RaftAppliedIndex, published)
	})

	// The leader's passes, 100 ms of its clock apart, while the learner
	// does not answer: none promotes it.
	for range 8 {
		step, err := h.pass()
		if err != nil {
			t.Fatal(err)
		}
		if step.Action != membership.Wait || !strings.Contains(step.Reason, "does not serve clients") {
			t.Fatalf("step %v, want a wait on the learner's serving", step)
		}
		ms, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ms.Members {
			if x.ID == uint64(id) && !x.IsLearner {
				t.Fatalf("%s is a voter while its status is not answered (%s)", id, step)
			}
		}
		h.now = h.now.Add(100 * time.Millisecond)
	}

	// It serves: the next passes promote it and finish the join.
	m.Hold.Release()
	testwait.For(t, 30*time.Second, "the join finished", func() (bool, string) {
		step, err := h.pass()
		h.now = h.now.Add(100 * time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		return step.Action == membership.FinishJoin, step.String()
	})
	ms, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ms.Members {
		if x.ID == uint64(id) && x.IsLearner {
			t.Fatalf("%s still a learner after the join finished", id)
		}
	}
}

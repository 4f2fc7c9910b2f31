package statuspage

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/statuspage/statuspagetest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/server/v3/embed"
)

// TestStatusPageInChromium loads the page in real headless Chromium against
// a real etcd cluster, then joins a second member as etcd's learner flow
// does it (MemberAddAsLearner, start it, MemberPromote) while writing the
// store objects the agent and the leader write, and checks that the page
// shows the learner, then the voter, without a reload; then that node as a
// standby and a removed node as removed, not dead. It keeps
// screenshots (paths in the log). tests/integration's
// TestStatusPageShowsAJoinLive does the same with real agents and a real
// coordinator.
func TestStatusPageInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1})
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	m0 := c.Members[0]
	put(t, st, node(m0.Name, api.MemberVoter))
	live := api.NewLiveness()
	live.Status.Nodes = map[string]api.NodeLiveness{m0.Name: {State: "alive", Since: time.Now()}}
	put(t, st, live)
	addr := serve(t, &Server{Listen: "127.0.0.1:0", Hub: &Hub{Store: st, Debounce: 100 * time.Millisecond}})
	artifacts := statuspagetest.ArtifactsDir(t, "statuspage")

	b := statuspagetest.NewBrowser(t, ctx)
	b.Load("http://"+addr+"/", `#member-m0[data-role="voter"]`)
	b.WaitFor(`body:not(.stale) #conn`) // the event stream is open

	// The leader adds the learner and journals the join.
	peer, client := etcdtest.URLsFor(t, false)
	add, err := st.Client().MemberAddAsLearner(ctx, []string{peer})
	if err != nil {
		t.Fatal(err)
	}
	id := api.MemberID(add.Member.ID)
	op := api.NewOperation("join-m1")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "m1", MemberID: id, PeerURL: peer}
	op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepLearner, StepSince: time.Now()}
	op.Record(time.Now(), "m0", "added m1 as a learner; waiting for it to start")
	put(t, st, op)
	if _, err := st.Client().Put(ctx, store.ActiveOpKey, op.Metadata.Name); err != nil {
		t.Fatal(err)
	}
	put(t, st, node("m1", api.MemberLearner))
	b.WaitFor(`#member-` + id.String() + `[data-role="learner"]`) // not started: no name yet
	b.WaitFor(`#op[data-step="Learner"]`)

	// The agent starts the member; it reports in.
	m1 := startLearner(t, c, "m1", peer, client)
	defer m1.Close()
	n1 := node("m1", api.MemberLearner)
	n1.Status.Message = "member started"
	put(t, st, n1)
	b.WaitFor(`#member-m1[data-role="learner"]`)
	b.Screenshot(artifacts, "join-learner.png")

	// The leader promotes it once it has caught up, and closes the join.
	promote(t, ctx, st, uint64(id))
	put(t, st, node("m1", api.MemberVoter))
	if _, err := st.Client().Delete(ctx, store.ActiveOpKey); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(`#member-m1[data-role="voter"]`)
	b.WaitFor(`#node-m1[data-member="voter"]`)
	if b.Reloaded() {
		t.Error("the page was reloaded: the join must show up live")
	}
	b.Screenshot(artifacts, "join-voter.png")

	// m1 shed to a standby (its record still names the voter it was), and
	// a removed node the leader reports dead: standby and removed, live,
	// the removed one not red.
	sb := node("m1", api.MemberVoter)
	sb.Status.Phase = api.NodeStandby
	put(t, st, sb)
	gone := node("m2", api.MemberVoter)
	gone.Status.Phase = api.NodeRemoved
	put(t, st, gone)
	live.Status.Nodes["m2"] = api.NodeLiveness{State: "dead", Since: time.Now(), Reason: "lease"}
	put(t, st, live)
	b.WaitFor(`#node-m1[data-member="standby"]`)
	b.WaitFor(`#node-m2[data-member="removed"][data-liveness="removed"]`)
	b.WaitFor(`#node-m2 td.muted[title="member removed and data wiped"]`)
	if b.Reloaded() {
		t.Error("the page was reloaded: standby and removed nodes must show up live")
	}
	b.Screenshot(artifacts, "standby-removed.png")
	b.CheckOnlyLoopback()
}

// startLearner starts an embedded member that joins c as its learner.
func startLearner(t *testing.T, c *etcdtest.Cluster, name, peer, client string) *embed.Etcd {
	t.Helper()
	parts := []string{name + "=" + peer}
	for _, m := range c.Members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	cfg, err := etcdtest.NewConfig(name, filepath.Join(t.TempDir(), "etcd"), peer, client, strings.Join(parts, ","), embed.ClusterStateFlagExisting)
	if err != nil {
		t.Fatal(err)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("learner not ready after 30s")
	}
	return e
}

// promote promotes learner id once etcd lets it (it has caught up).
func promote(t *testing.T, ctx context.Context, st *store.Store, id uint64) {
	t.Helper()
	for {
		_, err := st.Client().MemberPromote(ctx, id)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("promote %x: %v", id, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// leaderTerm campaigns on st and returns a candidate named name, its
// Config adjusted by opts, with the term's fence; the session closes when
// the test ends.
func leaderTerm(t *testing.T, st *store.Store, name string, opts ...func(*Config)) (*Coordinator, store.Fence) {
	t.Helper()
	sess, err := concurrency.NewSession(st.Client(), concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	e := concurrency.NewElection(sess, store.ElectionPrefix)
	if err := e.Campaign(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Name: name, ResyncInterval: time.Second, HealthTimeout: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	c := New(cfg, st, slog.New(slog.DiscardHandler))
	t.Cleanup(c.admin.Close)
	return c, store.Fence{Key: e.Key(), Rev: e.Rev()}
}

// testEtcdStatuser is the etcd-status controller c would run in the term
// fenced on fence (controllers.go).
func testEtcdStatuser(c *Coordinator, fence store.Fence) *etcdStatuser {
	return newEtcdStatuser(c.leaderDeps(fence), c.maint)
}

func dialStore(t *testing.T, cl *etcdtest.Cluster) *store.Store {
	t.Helper()
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	t.Cleanup(func() { cli.Close() })
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func putNode(t *testing.T, st *store.Store, name, peer string) {
	t.Helper()
	n := api.NewNode(name)
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.PeerURL = peer
	if err := st.Put(t.Context(), store.NodeKey(name), n); err != nil {
		t.Fatal(err)
	}
}

// TestStatusWriteKeepsAConcurrentSpec: a spec applied between the
// controller's read and its write is not overwritten: the write conflicts,
// the controller re-reads and writes its status on the new spec, keeping
// status.external (another controller's field) as it was.
func TestStatusWriteKeepsAConcurrentSpec(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st := dialStore(t, cl)
	ctx := t.Context()
	putNode(t, st, "cp-1", cl.Members[0].PeerURL)
	putNode(t, st, "cp-2", "https://127.0.0.9:2380")
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Status.External = []api.ExternalMemberStart{{Name: "ext-1", InitialCluster: "x=y", InitialClusterState: "existing"}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	c, fence := leaderTerm(t, st, "a")
	s := testEtcdStatuser(c, fence)
	obs, err := s.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The user applies voters: 3 meanwhile.
	applied := &api.EtcdCluster{}
	if err := st.Get(ctx, store.EtcdClusterKey, applied); err != nil {
		t.Fatal(err)
	}
	applied.Spec.Voters = 3
	if err := st.Update(ctx, store.EtcdClusterKey, applied); err != nil {
		t.Fatal(err)
	}
	if err := s.writeStatus(ctx, obs); err != nil {
		t.Fatal(err)
	}
	got := &api.EtcdCluster{}
	if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Voters != 3 {
		t.Fatalf("the applied spec was lost: voters %d", got.Spec.Voters)
	}
	if len(got.Status.External) != 1 || got.Status.External[0].Name != "ext-1" {
		t.Errorf("status.external not kept: %+v", got.Status.External)
	}
	// By name: the standby cp-2, then the voter m0 (its etcd name) on cp-1.
	if len(got.Status.Members) != 2 || got.Status.Members[1].Role != api.RoleVoter || got.Status.Members[0].Role != api.RoleStandby {
		t.Fatalf("members %+v", got.Status.Members)
	}
	if m := got.Status.Members[1]; !m.Healthy || !m.Leader || m.DBSize == 0 || m.Version == "" || m.RaftTerm == 0 || m.Node != "cp-1" {
		t.Errorf("voter %+v", m)
	}
	var rec api.Condition
	for _, cd := range got.Status.Conditions {
		if cd.Type == api.CondReconciled {
			rec = cd
		}
	}
	if rec.Status || rec.Message != "1 voters, spec.voters is 3" {
		t.Errorf("Reconciled answers the old spec: %+v", rec)
	}
	if got.Status.FaultTolerance != 0 || got.Status.Voters != 1 || got.Status.Leader == "" {
		t.Errorf("status %+v", got.Status)
	}

	// Nothing changed: the next pass writes nothing, though its own write
	// moved every raft index.
	rev := got.Metadata.Revision
	if err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	again := &api.EtcdCluster{}
	if err := st.Get(ctx, store.EtcdClusterKey, again); err != nil {
		t.Fatal(err)
	}
	if again.Metadata.Revision != rev {
		t.Errorf("an unchanged status was written again (revision %d -> %d)", rev, again.Metadata.Revision)
	}
}

// TestStatusWriteIsFenced: a deposed leader's status write is refused.
func TestStatusWriteIsFenced(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st := dialStore(t, cl)
	ctx := t.Context()
	if err := st.Put(ctx, store.EtcdClusterKey, api.NewEtcdCluster()); err != nil {
		t.Fatal(err)
	}
	c, _ := leaderTerm(t, st, "a")
	s := testEtcdStatuser(c, store.Fence{Key: store.ElectionPrefix + "gone", Rev: 1})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.reconcile(ctx); !isNotLeader(err) {
		t.Fatalf("reconcile with a stale fence = %v, want ErrNotLeader", err)
	}
}

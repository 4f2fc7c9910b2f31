package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLivenessGoesWithTheJoinJournal: a pass whose step writes nothing
// publishes a changed liveness record by itself; a pass that starts a join
// (no snapshot before it) writes the record as the first operation of the
// transaction that journals the operation, at that revision and before
// the active-operation key, and not in a write of its own before it. The
// learner is added after both.
func TestLivenessGoesWithTheJoinJournal(t *testing.T) {
	t.Parallel()
	st, fence := leaderStore(t)
	cli := st.Client()
	ctx := t.Context()
	c := New(Config{Name: "a", Clock: clockwork.NewFakeClock(), ResyncInterval: time.Hour, HealthTimeout: time.Second,
		Policy: membership.Policy{LearnerStartTimeout: time.Hour, LearnerProgressTimeout: time.Hour}}, st, slog.New(slog.DiscardHandler))
	t.Cleanup(c.admin.Close)
	r := newReconciler(testMembershipDeps(c, fence))
	ms, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seed := ms.Members[0]
	registerLive(t, st, seed.Name, seed.PeerURLs[0], seed.ClientURLs[0])

	w := watchStore(t, cli)
	if p, err := r.once(ctx); err != nil || p.Action != membership.None {
		t.Fatalf("first pass: %s, %v; want None", p.Action, err)
	}
	first := w.until(t, func(e storeEvent) bool { return e.key == store.LivenessKey })
	if first.alone != 1 {
		t.Fatalf("the first liveness record came in a transaction of %d changes, want 1 (a step that writes nothing carries none)", first.alone)
	}

	// A new control-plane node files its join: nothing listens at its
	// peer URL, so its learner stays unstarted.
	peer, client := etcdtest.URLs(t)
	registerLive(t, st, "cp-1", peer, client)
	j := api.NewJoinRequest("cp-1")
	j.Spec = api.JoinRequestSpec{Node: "cp-1", PeerURL: peer, ClientURL: client, Attempt: 1}
	if err := st.Put(ctx, store.JoinKey("cp-1"), j); err != nil {
		t.Fatal(err)
	}
	w.drain()
	p, err := r.once(ctx)
	if err != nil || p.Action != membership.AddLearner {
		t.Fatalf("join pass: %s, %v; want StartJoin then AddLearner", p.Action, err)
	}
	var live *storeEvent
	active := w.until(t, func(e storeEvent) bool {
		if e.key == store.LivenessKey && live == nil {
			live = &e
		}
		return e.key == store.ActiveOpKey
	})
	if live == nil || live.rev != active.rev {
		t.Fatalf("liveness %+v, operation started at revision %d: want the record first in the operation's transaction", live, active.rev)
	}
	if !strings.Contains(live.value, `"cp-1"`) {
		t.Fatalf("the record carried with the join does not have cp-1: %s", live.value)
	}
	after, err := cli.MemberList(ctx)
	if err != nil || len(after.Members) != 2 {
		t.Fatalf("members after the pass: %v, %v; want the learner added", after, err)
	}
}

// TestJournalsFirst: only a start with no snapshot taken before it
// carries the liveness record in its journal write.
func TestJournalsFirst(t *testing.T) {
	t.Parallel()
	snaps := api.NewEtcdCluster()
	snaps.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: "/mnt/share"}
	off := api.NewEtcdCluster()
	for _, tc := range []struct {
		action membership.Action
		ec     *api.EtcdCluster
		want   bool
	}{
		{membership.StartJoin, nil, true},
		{membership.StartJoin, off, true},
		{membership.StartRemove, off, true},
		{membership.StartJoin, snaps, false},
		{membership.StartRemove, snaps, false},
		{membership.AddLearner, off, false},
		{membership.Promote, off, false},
		{membership.RemoveMember, off, false},
		{membership.TransferLeader, off, false},
		{membership.None, off, false},
	} {
		if got := journalsFirst(membership.Step{Action: tc.action}, tc.ec); got != tc.want {
			t.Errorf("journalsFirst(%s, snapshots %v) = %v, want %v", tc.action, tc.ec != nil && tc.ec.Spec.Snapshots.Enabled(), got, tc.want)
		}
	}
}

// registerLive writes a control-plane node and its heartbeat on a lease.
func registerLive(t *testing.T, st *store.Store, name, peer, client string) {
	t.Helper()
	n := api.NewNode(name)
	n.Spec = api.NodeSpec{Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}
	if err := st.Put(t.Context(), store.NodeKey(name), n); err != nil {
		t.Fatal(err)
	}
	l, err := st.Client().Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Txn(t.Context()).Then(store.HeartbeatOp(name, time.Now(), l.ID)).Commit(); err != nil {
		t.Fatal(err)
	}
}

// storeEvent is one change under the store's prefix: its revision, its
// place among all changes seen (seq), and how many changes its
// transaction made (alone).
type storeEvent struct {
	rev        int64
	seq, alone int
	key, value string
}

type storeWatch struct {
	ch  clientv3.WatchChan
	buf []storeEvent
	seq int
}

// watchStore watches every change under the store's prefix from now on;
// cli is the store's client (scoped to its prefix).
func watchStore(t *testing.T, cli *clientv3.Client) *storeWatch {
	t.Helper()
	resp, err := cli.Get(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &storeWatch{ch: cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))}
}

// until returns the first change, from the ones not returned yet, that
// match takes; the ones before it are dropped.
func (w *storeWatch) until(t *testing.T, match func(storeEvent) bool) storeEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for len(w.buf) > 0 {
			e := w.buf[0]
			w.buf = w.buf[1:]
			if match(e) {
				return e
			}
		}
		select {
		case r, ok := <-w.ch:
			if !ok || r.Err() != nil {
				t.Fatalf("watch ended: %v", r.Err())
			}
			w.add(r.Events)
		case <-timeout:
			t.Fatal("no matching change within 10s")
		}
	}
}

// add keeps events, counting the changes of each revision.
func (w *storeWatch) add(evs []*clientv3.Event) {
	perRev := map[int64]int{}
	for _, ev := range evs {
		perRev[ev.Kv.ModRevision]++
	}
	for _, ev := range evs {
		w.seq++
		w.buf = append(w.buf, storeEvent{rev: ev.Kv.ModRevision, seq: w.seq, alone: perRev[ev.Kv.ModRevision],
			key: string(ev.Kv.Key), value: string(ev.Kv.Value)})
	}
}

// drain drops every change seen so far.
func (w *storeWatch) drain() {
	for {
		select {
		case r := <-w.ch:
			w.add(r.Events)
		default:
			w.buf = nil
			return
		}
	}
}

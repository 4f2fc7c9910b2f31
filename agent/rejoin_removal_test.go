package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/sdnotify/notifytest"
	"github.com/homystack/nico/pkg/store"
)

// TestRejoinWaitsForTheEarlierRemoval: an agent started again after its
// node's removal, before the leader recorded that removal finished (the
// node's record says Removed, the request is still Running), files no
// join until the removal is Done; then it clears the removal and files its
// join in one transaction. Filed at once, the join would be ended by the
// removal finishing beside it ("removed while joining") and the node would
// stay out. A removal the node has not carried out (its record names a
// member) is no earlier removal: the join is filed at once, as before.
func TestRejoinWaitsForTheEarlierRemoval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase api.NodePhase
		waits bool
	}{
		{"carried out", api.NodeRemoved, true},
		{"not carried out", api.NodeMember, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := notifytest.Listen(t)
			st := oneMemberStore(t)
			ctx := t.Context()
			old := api.NewNode("cp-2")
			old.Status = api.NodeStatus{Phase: tc.phase}
			if err := st.Put(ctx, store.NodeKey("cp-2"), old); err != nil {
				t.Fatal(err)
			}
			r := api.NewRemoveRequest("cp-2")
			r.Status.Phase = api.RemoveRunning
			if err := st.Put(ctx, store.RemovalKey("cp-2"), r); err != nil {
				t.Fatal(err)
			}
			peer, client := etcdtest.URLs(t)
			// Re-reads an hour apart: only the watch on the removal wakes it.
			cfg := Config{Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client, RetryInterval: time.Hour}
			a := New(cfg, nil, sdnotify.New(), logging.Test(t))
			a.use(st.Client(), st)
			type result struct {
				v   *joinView
				err error
			}
			filed := make(chan result, 1)
			go func() {
				v, err := a.etcdJoin.registerAndRequest(ctx, true)
				filed <- result{v, err}
			}()
			if tc.waits {
				for msg := sock.Next(t); !strings.Contains(msg, "earlier removal"); msg = sock.Next(t) {
				}
				if err := st.Get(ctx, store.JoinKey("cp-2"), &api.JoinRequest{}); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("a join request was filed while the earlier removal ran (%v)", err)
				}
				r.Status.Phase = api.RemoveDone
				if err := st.Put(ctx, store.RemovalKey("cp-2"), r); err != nil {
					t.Fatal(err)
				}
			}
			var got result
			select {
			case got = <-filed:
			case <-time.After(30 * time.Second):
				t.Fatal("no join request filed")
			}
			if got.err != nil || got.v == nil || got.v.join == nil {
				t.Fatalf("registerAndRequest: %+v, %v; want a filed join request", got.v, got.err)
			}
			j := &api.JoinRequest{}
			if err := st.Get(ctx, store.JoinKey("cp-2"), j); err != nil || j.Spec.PeerURL != peer {
				t.Fatalf("join request %+v (%v), want one for %s", j.Spec, err, peer)
			}
			rm := &api.RemoveRequest{}
			err := st.Get(ctx, store.RemovalKey("cp-2"), rm)
			switch {
			case tc.waits && !errors.Is(err, store.ErrNotFound):
				t.Fatalf("the finished removal is still there (phase %q, %v); want it cleared with the join", rm.Status.Phase, err)
			case !tc.waits && (err != nil || rm.Status.Phase != api.RemoveRunning):
				t.Fatalf("removal %q (%v), want it left Running", rm.Status.Phase, err)
			}
		})
	}
}

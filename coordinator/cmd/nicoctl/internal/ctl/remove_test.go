package ctl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

func TestRemoveRefusedLocally(t *testing.T) {
	t.Run("unknown node", func(t *testing.T) {
		c := etcdtest.Start(t, 1)
		st := newStore(t, c)
		registerNode(t, st, "cp-1", c.Members[0])
		registerNode(t, st, "cp-2", &etcdtest.Member{PeerURL: "https://127.0.0.1:9", ClientURL: "https://127.0.0.1:9"})
		run(t, c.Endpoints(), "remove", "node", "cp-7").want(t, ExitNotFound, nil, []string{"no node named cp-7; known nodes: cp-1, cp-2"})
		// The last voting member is refused, with or without --force, and
		// nothing is filed.
		for _, args := range [][]string{{"remove", "node", "cp-1"}, {"remove", "node", "cp-1", "--force"}} {
			run(t, c.Endpoints(), args...).want(t, ExitRefused, nil, []string{"refusing to remove cp-1", "last voting member"})
		}
		assertNoRequest(t, st, "cp-1")
	})
	t.Run("ghost voter", func(t *testing.T) {
		// Two voters, only one registered: removing it leaves one voter that
		// has no node, which cannot count as healthy.
		c := etcdtest.Start(t, 2)
		st := newStore(t, c)
		registerNode(t, st, "cp-1", c.Members[0])
		run(t, c.Endpoints(), "remove", "node", "cp-1").want(t, ExitRefused, nil,
			[]string{"refusing to remove cp-1", "below quorum 1", "m1 has no registered node"})
		assertNoRequest(t, st, "cp-1")

		r := run(t, c.Endpoints(), "remove", "node", "cp-1", "--force", "--no-wait")
		r.want(t, 0, []string{"removal of cp-1 requested"}, []string{"WARNING: forcing the removal of cp-1", "m1 has no registered node", "may be lost"})
		req := &api.RemoveRequest{}
		if err := st.Get(testCtx(t), store.RemovalKey("cp-1"), req); err != nil {
			t.Fatal(err)
		}
		if !req.Spec.Force || !strings.HasPrefix(req.Spec.RequestedBy, "nicoctl") || req.Status.Phase != api.RemovePending {
			t.Fatalf("filed %+v", req)
		}
		// A second request while the first is pending is not filed.
		run(t, c.Endpoints(), "remove", "node", "cp-1", "--force", "--no-wait").want(t, ExitFailed, nil, []string{"already pending", "cp-1"})
	})
}

func assertNoRequest(t *testing.T, st *store.Store, node string) {
	t.Helper()
	resp, err := st.Client().Get(testCtx(t), store.RemovalKey(node))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a removal of %s was filed: %v %v", node, resp, err)
	}
}

// TestRemoveThroughLeader removes a voter of a real two-member cluster
// through a real coordinator and waits for its answer.
func TestRemoveThroughLeader(t *testing.T) {
	c := etcdtest.Start(t, 2)
	// Everyone talks to m0 only: the removed embedded m1 keeps its client
	// port open with raft stopped, where a real node's agent stops it.
	eps := c.Endpoints()[:1]
	st, err := store.New(etcdtest.NewClient(t, eps...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cst, err := store.New(etcdtest.NewClient(t, eps...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	registerNode(t, st, "cp-1", c.Members[0])
	registerNode(t, st, "cp-2", c.Members[1])
	co := coordinator.New(coordinator.Config{
		Name: "coord-1", SessionTTL: 2 * time.Second, ResyncInterval: 200 * time.Millisecond, HealthTimeout: time.Second,
		Policy: membership.DefaultPolicy,
	}, cst, slog.New(slog.NewTextHandler(tWriter{t}, nil)))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	}()

	waitLeader(t, st, "coord-1")

	r := run(t, eps, "remove", "node", "cp-2", "--wait-timeout", "60s")
	r.want(t, 0, []string{"removal of cp-2: Done (op ", "member removed"}, nil)
	if r.stderr != "" {
		t.Errorf("unexpected stderr: %s", r.stderr)
	}
	resp, err := st.Client().MemberList(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 1 || resp.Members[0].Name != "m0" {
		t.Fatalf("members after removal: %v", resp.Members)
	}
	// The operation is journaled as done.
	run(t, eps, "get", "ops").want(t, 0, []string{"Remove", "cp-2", "Succeeded", "Done"}, nil)
}

// waitLeader polls until name is the coordinator leader.
func waitLeader(t *testing.T, st *store.Store, name string) {
	t.Helper()
	testwait.For(t, 30*time.Second, name+" to lead", func() (bool, string) {
		got, err := coordinator.Leader(testCtx(t), st)
		return err == nil && got == name, fmt.Sprintf("coordinator leader = %q (%v), want %s", got, err, name)
	})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

package requests_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
)

func newStore(t *testing.T, c *etcdtest.Cluster) *store.Store {
	t.Helper()
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fakeLeader answers the removal of node with each status in turn, the way
// the coordinator's leader would, and reports its first error on done. When
// seen is not nil, it writes each answer only after receiving from seen
// (the waiter saw the previous phase).
func fakeLeader(ctx context.Context, st *store.Store, node string, seen <-chan struct{}, answers ...api.RemoveRequestStatus) <-chan error {
	done := make(chan error, 1)
	go func() {
		for _, a := range answers {
			if seen != nil {
				select {
				case <-seen:
				case <-ctx.Done():
					done <- ctx.Err()
					return
				}
			}
			for {
				r := &api.RemoveRequest{}
				err := st.Get(ctx, store.RemovalKey(node), r)
				if err == nil {
					r.Status = a
					if err = st.Update(ctx, store.RemovalKey(node), r); err == nil {
						break
					}
				}
				if ctx.Err() != nil {
					done <- err
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		done <- nil
	}()
	return done
}

func TestRemovalAnswers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	running := api.RemoveRequestStatus{Phase: api.RemoveRunning, Operation: "op-1"}
	cases := []struct {
		node    string
		final   api.RemoveRequestStatus
		wantErr error
		phases  []api.RemovePhase
	}{
		{"done", api.RemoveRequestStatus{Phase: api.RemoveDone, Operation: "op-1", Message: "member removed"}, nil,
			[]api.RemovePhase{api.RemovePending, api.RemoveRunning, api.RemoveDone}},
		{"refused", api.RemoveRequestStatus{Phase: api.RemoveRefused, Message: "below quorum"}, requests.ErrRefused,
			[]api.RemovePhase{api.RemovePending, api.RemoveRefused}},
		{"failed", api.RemoveRequestStatus{Phase: api.RemoveFailed, Operation: "op-1", Message: "etcd said no"}, requests.ErrFailed,
			[]api.RemovePhase{api.RemovePending, api.RemoveRunning, api.RemoveFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			r, err := requests.RequestRemoval(ctx, st, tc.node, true, "test")
			if err != nil {
				t.Fatal(err)
			}
			if !r.Spec.Force || r.Spec.RequestedBy != "test" || r.Metadata.CreatedAt.IsZero() {
				t.Fatalf("filed %+v", r)
			}
			answers := []api.RemoveRequestStatus{tc.final}
			if tc.final.Phase != api.RemoveRefused {
				answers = append([]api.RemoveRequestStatus{running}, answers...)
			}
			// The leader answers each phase only once the waiter has seen
			// the previous one, so every phase is observed.
			var seen []api.RemovePhase
			step := make(chan struct{}, 8)
			leader := fakeLeader(ctx, st, tc.node, step, answers...)
			got, err := requests.WaitRemoval(ctx, st, tc.node, func(r *api.RemoveRequest) {
				seen = append(seen, r.Status.Phase)
				step <- struct{}{}
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.final.Message) {
				t.Fatalf("err %q does not carry the leader's message %q", err, tc.final.Message)
			}
			if got == nil || got.Status.Phase != tc.final.Phase {
				t.Fatalf("got %+v, want phase %s", got, tc.final.Phase)
			}
			if !slices.Equal(seen, tc.phases) {
				t.Fatalf("progress saw %v, want %v", seen, tc.phases)
			}
			if err := <-leader; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRequestRemovalPendingAndReplace(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	ctx := testCtx(t, 30*time.Second)
	first, err := requests.RequestRemoval(ctx, st, "cp-2", false, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// An unfinished request is not filed over.
	_, err = requests.RequestRemoval(ctx, st, "cp-2", true, "bob")
	if !errors.Is(err, requests.ErrRemovalPending) || !strings.Contains(err.Error(), "cp-2") {
		t.Fatalf("second request: %v, want requests.ErrRemovalPending naming cp-2", err)
	}
	// A finished one is replaced with a fresh status.
	if err := <-fakeLeader(ctx, st, "cp-2", nil, api.RemoveRequestStatus{Phase: api.RemoveRefused, Message: "no"}); err != nil {
		t.Fatal(err)
	}
	again, err := requests.RequestRemoval(ctx, st, "cp-2", true, "bob")
	if err != nil {
		t.Fatal(err)
	}
	got := &api.RemoveRequest{}
	if err := st.Get(ctx, store.RemovalKey("cp-2"), got); err != nil {
		t.Fatal(err)
	}
	if got.Status != (api.RemoveRequestStatus{}) || !got.Spec.Force || got.Spec.RequestedBy != "bob" {
		t.Fatalf("replaced request = %+v", got)
	}
	if got.Metadata.CreatedAt.Before(first.Metadata.CreatedAt) || !got.Metadata.CreatedAt.Equal(again.Metadata.CreatedAt) {
		t.Fatalf("createdAt %v, first %v", got.Metadata.CreatedAt, first.Metadata.CreatedAt)
	}
}

func TestWaitRemovalEndsWithContext(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	if _, err := requests.RequestRemoval(testCtx(t, 10*time.Second), st, "cp-3", false, "test"); err != nil {
		t.Fatal(err)
	}
	// ctx ends as soon as WaitRemoval has read the request, however long
	// the read took.
	ctx, cancel := context.WithCancel(testCtx(t, 30*time.Second))
	defer cancel()
	_, err := requests.WaitRemoval(ctx, st, "cp-3", func(*api.RemoveRequest) { cancel() })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "Pending") {
		t.Fatalf("err = %v, want the context's end naming the phase", err)
	}
	// A request that does not exist is an error, not a wait.
	if _, err := requests.WaitRemoval(testCtx(t, 10*time.Second), st, "nope", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing request: %v", err)
	}
}

// TestRealLeaderRefusesLastMember files the removal of the only member of
// a real cluster and waits for a real coordinator's refusal.
func TestRealLeaderRefusesLastMember(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	ctx := testCtx(t, 60*time.Second)
	m := c.Members[0]
	n := api.NewNode("cp-1")
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.PeerURL, n.Spec.ClientURL = m.PeerURL, m.ClientURL
	n.Status.Phase = api.NodeMember
	if err := st.Put(ctx, store.NodeKey("cp-1"), n); err != nil {
		t.Fatal(err)
	}

	cst := newStore(t, c)
	co := coordinator.New(coordinator.Config{
		Name: "coord-1", SessionTTL: 2 * time.Second, ResyncInterval: 200 * time.Millisecond, HealthTimeout: time.Second,
		Policy: membership.DefaultPolicy,
	}, cst, slog.New(slog.NewTextHandler(tWriter{t}, nil)))
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(cctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	}()

	if _, err := requests.RequestRemoval(ctx, st, "cp-1", false, "test"); err != nil {
		t.Fatal(err)
	}
	r, err := requests.WaitRemoval(ctx, st, "cp-1", nil)
	if !errors.Is(err, requests.ErrRefused) || !strings.Contains(err.Error(), "last voting member") {
		t.Fatalf("err = %v, want a refusal naming the last voting member", err)
	}
	if r.Status.Phase != api.RemoveRefused {
		t.Fatalf("phase = %s", r.Status.Phase)
	}
	// The member is still there.
	resp, err := st.Client().MemberList(ctx)
	if err != nil || len(resp.Members) != 1 {
		t.Fatalf("members after refusal: %v %v", resp, err)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestLostMemberRemovalFiledAgainWhenRefused: a node whose member lost its
// data files its own removal; the leader refuses it (removing it then
// would leave too few healthy voters: another voter had not started yet).
// The agent files it again rather than wait forever for a removal that
// was refused (TestWipedVoterRejoins/joiner in make e2e-faults hung so:
// cp-3, just promoted, was not serving when the wiped cp-2 asked).
func TestLostMemberRemovalFiledAgainWhenRefused(t *testing.T) {
	st := oneMemberStore(t)
	a := New(Config{Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, DataDir: t.TempDir(),
		PeerURL: "https://10.0.0.2:2380", RetryInterval: 10 * time.Millisecond}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.etcdJoin.removeLost(ctx, 0x2) }()

	get := func() *api.RemoveRequest {
		r := &api.RemoveRequest{}
		if err := st.Get(t.Context(), store.RemovalKey("cp-2"), r); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return r
	}
	testwait.True(t, 10*time.Second, "the removal filed", func() bool { return get().Metadata.Revision != 0 })
	// The leader refuses it.
	r := get()
	r.Status.Phase, r.Status.Message = api.RemoveRefused, "removing cp-2 is unsafe: it would leave 1 healthy voter(s) of 2, below quorum 2 (cp-3 is unhealthy)"
	if err := st.UpdateObject(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	refused := r.Metadata.Revision
	testwait.For(t, 10*time.Second, "the removal filed again", func() (bool, string) {
		r := get()
		return r.Status.Phase == api.RemovePending && r.Metadata.Revision > refused, string(r.Status.Phase)
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("removeLost returned %v, want the context's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("removeLost did not return when its context ended")
	}
}

package coordinator

import (
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// TestMembershipObservesALearnerAtAFixedInterval: etcd's member list has
// no watch, so a pass that finds a learner among the members wakes the
// membership controller again LearnerObserveEvery later, long before the
// resync tick; a pass without one asks for nothing.
func TestMembershipObservesALearnerAtAFixedInterval(t *testing.T) {
	t.Parallel()
	st, fence := leaderStore(t)
	cli := st.Client()
	ctx := t.Context()
	clock := clockwork.NewFakeClock()
	c := New(Config{Name: "a", Clock: clock, ResyncInterval: time.Hour, HealthTimeout: time.Second,
		Policy: membership.Policy{LearnerStartTimeout: time.Hour, LearnerProgressTimeout: time.Hour}}, st, slog.New(slog.DiscardHandler))
	t.Cleanup(c.admin.Close)
	r := newReconciler(testMembershipDeps(c, fence))
	woken := func() bool {
		select {
		case <-r.wake:
			return true
		default:
			return false
		}
	}

	if err := r.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if woken() {
		t.Fatal("a pass with no learner asked for another")
	}

	// A learner that never starts: nothing listens at its peer URL.
	peer, _ := etcdtest.URLs(t)
	if _, err := cli.MemberAddAsLearner(ctx, []string{peer}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(LearnerObserveEvery - time.Millisecond)
		if woken() {
			t.Fatalf("woken before %s", LearnerObserveEvery)
		}
		clock.Advance(time.Millisecond)
		// The fake clock may run the wake on a goroutine of its own.
		testwait.For(t, 5*time.Second, "a wake-up "+LearnerObserveEvery.String()+" after a pass with a learner", func() (bool, string) {
			return woken(), "no wake-up"
		})
	}
}

// leaderStore is a store on a new one-member etcd, and the fence of a
// leadership term of candidate "a" in it.
func leaderStore(t *testing.T) (*store.Store, store.Fence) {
	t.Helper()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := st.Client().Put(t.Context(), store.ElectionPrefix+"a", "a")
	if err != nil {
		t.Fatal(err)
	}
	return st, store.Fence{Key: store.ElectionPrefix + "a", Rev: resp.Header.Revision}
}

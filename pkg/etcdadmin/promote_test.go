package etcdadmin

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/testwait"
)

// TestPromotePause: a refused try is followed by another PromoteSoon
// later while the promotion is in its first PromoteSoonFor, then
// PromoteEvery later.
func TestPromotePause(t *testing.T) {
	for _, c := range []struct {
		elapsed time.Duration
		want    time.Duration
	}{
		{0, PromoteSoon},
		{PromoteSoonFor - time.Millisecond, PromoteSoon},
		{PromoteSoonFor, PromoteEvery},
		{time.Minute, PromoteEvery},
	} {
		if got := promotePause(c.elapsed); got != c.want {
			t.Errorf("promotePause(%s) = %s, want %s", c.elapsed, got, c.want)
		}
	}
}

// TestPromoteTriesAgainOnWake: with its interval out of reach, Promote
// promotes a learner that caught up as soon as it is told to try again
// (TryAgainOn), not at its next tick.
func TestPromoteTriesAgainOnWake(t *testing.T) {
	defer func(e, s time.Duration) { promoteEvery, promoteSoonFor = e, s }(promoteEvery, promoteSoonFor)
	promoteEvery, promoteSoonFor = time.Hour, 0

	cl := etcdtest.Start(t, 1)
	a := New(cl.Client(t), time.Second)
	t.Cleanup(a.Close)
	peer, client := etcdtest.URLs(t)
	id, initial, err := a.AddLearner(ctx(t), "m9", peer)
	if err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	pctx, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	promoted := make(chan error, 1)
	go func() {
		promoted <- a.Promote(TryAgainOn(pctx, wake), cl.Endpoints(), id, "", cl.Members[0].ClientURL, nil)
	}()

	// The first try, at once, finds the learner unstarted; the next is an
	// hour away unless a wake brings it forward.
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	if err := rt.Start(ctx(t), member.Config{Name: "m9", DataDir: t.TempDir() + "/etcd", PeerURL: peer, ClientURL: client, InitialCluster: initial, ClusterState: "existing", ClusterToken: "etcdtest", TLS: etcdtest.MemberTLS(t, "m9", peer, client)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	var got error
	testwait.For(t, 20*time.Second, "Promote to return after a wake", func() (bool, string) {
		select {
		case wake <- struct{}{}:
		default:
		}
		select {
		case got = <-promoted:
			return true, ""
		default:
			return false, "Promote still waiting"
		}
	})
	if got != nil {
		t.Fatalf("promote: %v", got)
	}
}

package etcdadmin

import (
	"context"
	"errors"
	"fmt"
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
	t.Parallel()
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
// It sets the package's promotion pace, so it does not run beside others.
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
		promoted <- a.Promote(TryAgainOn(pctx, wake), cl.Endpoints(), id, client, cl.Members[0].ClientURL, nil)
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

// TestPromoteWaitsUntilTheLearnerServes: a learner in sync whose client
// URL does not answer (its listener behind a hold) is not promoted, though
// etcd would accept it; once its status is answered, it is.
func TestPromoteWaitsUntilTheLearnerServes(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := cl.Client(t)
	a := New(cli, 300*time.Millisecond)
	t.Cleanup(a.Close)
	peer, _ := etcdtest.URLs(t)
	id, initial, err := a.AddLearner(ctx(t), "m9", peer)
	if err != nil {
		t.Fatal(err)
	}
	m := etcdtest.StartHeld(t, "m9", peer, initial)
	// In sync: its own listener (not the URL it publishes) shows the
	// leader's applied index, after a write that follows its start.
	if _, err := cli.Put(ctx(t), "/user/after-start", "x"); err != nil {
		t.Fatal(err)
	}
	lst, err := cli.Status(ctx(t), cl.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the learner in sync", func() (bool, string) {
		st, err := cli.Status(ctx(t), m.ListenURL)
		if err != nil {
			return false, err.Error()
		}
		return st.RaftAppliedIndex >= lst.RaftAppliedIndex, fmt.Sprintf("applied %d of %d", st.RaftAppliedIndex, lst.RaftAppliedIndex)
	})
	testwait.For(t, 20*time.Second, "the learner published", func() (bool, string) {
		ms, err := cli.MemberList(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		for _, x := range ms.Members {
			if x.ID == uint64(id) && len(x.ClientURLs) > 0 {
				return true, ""
			}
		}
		return false, "no client URL yet"
	})

	pctx, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	err = a.Promote(pctx, cl.Endpoints(), id, m.ClientURL, cl.Members[0].ClientURL, nil)
	cancel()
	if err == nil {
		t.Fatal("promoted a learner whose status is not answered")
	}
	if !errors.Is(err, ErrNotServing) {
		t.Fatalf("promote: %v, want ErrNotServing", err)
	}
	ms, err := cli.MemberList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ms.Members {
		if x.ID == uint64(id) && !x.IsLearner {
			t.Fatal("the learner is a voter although it does not serve")
		}
	}
	if err := a.Promote(ctx(t), cl.Endpoints(), id, "", cl.Members[0].ClientURL, nil); !errors.Is(err, ErrNotServing) {
		t.Fatalf("promote with no client URL: %v, want ErrNotServing", err)
	}

	m.Hold.Release()
	if err := a.Promote(ctx(t), cl.Endpoints(), id, m.ClientURL, cl.Members[0].ClientURL, nil); err != nil {
		t.Fatalf("promote once the learner serves: %v", err)
	}
}

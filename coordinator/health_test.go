package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/testwait"
)

// waitHealthy waits until c.Healthy() is want.
func waitHealthy(t *testing.T, c *Coordinator, want bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("Healthy() %v", want), func() (bool, string) {
		return c.Healthy() == want, fmt.Sprintf("Healthy() stays %v", !want)
	})
}

// TestHealthFollowsTheElectionSession: Campaigning is closed and the
// candidate is healthy once it campaigns; it is unhealthy once its session's lease is gone, healthy
// again with the next term's session, and unhealthy after Run returns.
func TestHealthFollowsTheElectionSession(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cd := startCandidate(t, cl, "c-1", 2*time.Second)
	select {
	case <-cd.c.Campaigning():
	case <-time.After(30 * time.Second):
		t.Fatal("Campaigning is not closed")
	}
	waitHealthy(t, cd.c, true)
	first := cd.c.candidacy.sess.Load()
	if _, err := cd.cli.Revoke(t.Context(), first.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the session does not end when its lease is revoked")
	}
	if cd.c.Healthy() && cd.c.candidacy.sess.Load() == first {
		t.Fatal("healthy on a session that ended")
	}
	testwait.True(t, 30*time.Second, "a healthy next term", func() bool {
		return cd.c.candidacy.sess.Load() != first && cd.c.Healthy()
	})
	cd.stop(t)
	if cd.c.Healthy() {
		t.Error("healthy after Run returned")
	}
}

package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
)

// waitHealthy waits until c.Healthy() is want.
func waitHealthy(t *testing.T, c *Coordinator, want bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.Healthy() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Healthy() stays %v", !want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHealthFollowsTheElectionSession: Campaigning is closed and the
// candidate is healthy once it campaigns; it is unhealthy once its session's lease is gone, healthy
// again with the next term's session, and unhealthy after Run returns.
func TestHealthFollowsTheElectionSession(t *testing.T) {
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
	deadline := time.Now().Add(30 * time.Second)
	for cd.c.candidacy.sess.Load() == first || !cd.c.Healthy() {
		if time.Now().After(deadline) {
			t.Fatal("no healthy next term")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cd.stop(t)
	if cd.c.Healthy() {
		t.Error("healthy after Run returned")
	}
}

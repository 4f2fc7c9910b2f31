package etcdadmin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		nil:                               false,
		rpctypes.ErrUnhealthy:             true,
		rpctypes.ErrTooManyLearners:       true,
		rpctypes.ErrMemberLearnerNotReady: true,
		rpctypes.ErrGRPCLearnerNotReady:   true,
		fmt.Errorf("x: %w", context.DeadlineExceeded):            true,
		fmt.Errorf("promote: %w", rpctypes.ErrTooManyLearners):   true,
		fmt.Errorf("grpc: %w", rpctypes.ErrGRPCUnhealthy):        true,
		errors.New(rpctypes.ErrorDesc(rpctypes.ErrUnhealthy)):    false,
		fmt.Errorf("remove: %w", rpctypes.ErrGRPCMemberNotFound): false,
		rpctypes.ErrMemberNotFound:                               false,
		rpctypes.ErrPeerURLExist:                                 false,
		rpctypes.ErrStopped:                                      false,
		fmt.Errorf("%w: %w", errAskAgain, rpctypes.ErrStopped):   true,
		fmt.Errorf("promote: %w: no answer", ErrNotServing):      true,
		errors.New("permission denied"):                          false,
	} {
		if got := Retryable(err); got != want {
			t.Errorf("Retryable(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestTransient: a request that timed out, lost its member or connection,
// or met a changed auth revision passes by itself; a refusal does not.
func TestTransient(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		nil: false,
		fmt.Errorf("rbac: auth status: %w", rpctypes.ErrTimeout): true,
		rpctypes.ErrGRPCTimeout:                                  true,
		rpctypes.ErrTimeoutDueToConnectionLost:                   true,
		rpctypes.ErrLeaderChanged:                                true,
		rpctypes.ErrAuthOldRevision:                              true,
		rpctypes.ErrStopped:                                      true,
		status.Error(codes.Unavailable, "connection refused"):    true,
		status.Error(codes.DeadlineExceeded, "deadline"):         true,
		fmt.Errorf("x: %w", context.DeadlineExceeded):            true,
		rpctypes.ErrPermissionDenied:                             false,
		rpctypes.ErrAuthFailed:                                   false,
		errors.New("open ca.crt: no such file or directory"):     false,
	} {
		if got := Transient(err); got != want {
			t.Errorf("Transient(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestIsEtcdError: etcd's errors are matched by type, converted by the
// client or as gRPC status errors, wrapped or not; an error that only reads
// like one is not etcd's.
func TestIsEtcdError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrMemberNotFound, true},
		{rpctypes.ErrGRPCMemberNotFound, true},
		{fmt.Errorf("backoff: gave up: %w: %w", context.DeadlineExceeded, rpctypes.ErrMemberNotFound), true},
		{fmt.Errorf("x: %w", rpctypes.ErrGRPCMemberNotFound), true},
		{errors.New(rpctypes.ErrorDesc(rpctypes.ErrMemberNotFound)), false},
		{rpctypes.ErrPeerURLExist, false},
	} {
		if got := isEtcdError(tc.err, rpctypes.ErrMemberNotFound); got != tc.want {
			t.Errorf("isEtcdError(%v, ErrMemberNotFound) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestLearnerLifecycle: observe a 2-voter cluster, add a learner (retrying
// the strict reconfig check), see it unstarted and unhealthy, start it, wait
// until it caught up, promote it through the voters, move leadership to it,
// and remove it again; removing an absent member is no error.
func TestLearnerLifecycle(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 2)
	cli := cl.Client(t)
	a := New(cli, etcdtest.CallBudget)
	t.Cleanup(a.Close)

	ms, err := a.Observe(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, m := range ms {
		if !m.Healthy || m.Learner || m.RaftIndex == 0 {
			t.Fatalf("member %+v: want a healthy voter with a raft index", m)
		}
		if m.Leader {
			leaders++
		}
	}
	if len(ms) != 2 || leaders != 1 {
		t.Fatalf("observed %d members, %d leaders", len(ms), leaders)
	}

	peer, client := etcdtest.URLs(t)
	id, initial, err := a.AddLearner(ctx(t), "m9", peer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(initial, "m9="+peer) || !strings.Contains(initial, "m0=") || !strings.Contains(initial, "m1=") {
		t.Fatalf("initial cluster %q", initial)
	}
	// The member list is read serializably: a follower may show the new
	// learner a moment later than the leader that added it.
	testwait.For(t, 10*time.Second, "the learner observed", func() (bool, string) {
		ms, err := a.Observe(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		m := find(ms, id)
		if m == nil {
			return false, "learner not observed"
		}
		if !m.Learner || m.Healthy || m.Started() {
			t.Fatalf("fresh learner %+v: want unstarted, unhealthy", *m)
		}
		return true, ""
	})

	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	if err := rt.Start(ctx(t), member.Config{Name: "m9", DataDir: t.TempDir() + "/etcd", PeerURL: peer, ClientURL: client, InitialCluster: initial, ClusterState: "existing", ClusterToken: "etcdtest", TLS: etcdtest.MemberTLS(t, "m9", peer, client)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })

	var progress []uint64
	leaderURL := cl.Members[0].ClientURL
	if err := a.Promote(ctx(t), []string{}, id, client, leaderURL, nil); err == nil {
		t.Fatal("promote with no voter to ask succeeded")
	}
	if err := a.Promote(ctx(t), cl.Endpoints(), id, client, leaderURL, func(i uint64) { progress = append(progress, i) }); err != nil {
		t.Fatal(err)
	}
	if len(progress) == 0 {
		t.Fatal("the learner's progress was not reported")
	}
	// Observe reads the member list serializably, from whichever member the
	// client talks to: a follower may apply the promotion a moment after
	// the leader acknowledged it. It must show a voter soon, and never
	// lose the member.
	testwait.For(t, 10*time.Second, "the promoted member observed as a voter", func() (bool, string) {
		ms, err := a.Observe(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		m := find(ms, id)
		if m == nil {
			t.Fatalf("member %s vanished after Promote: %+v", id, ms)
		}
		return !m.Learner, fmt.Sprintf("member %s is still a learner after Promote", id)
	})

	// Move leadership to the new voter, through the current leader.
	ms, _ = a.Observe(ctx(t))
	for _, m := range ms {
		if m.Leader {
			leaderURL = m.ClientURLs[0]
		}
	}
	if err := a.MoveLeader(ctx(t), leaderURL, id); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "leadership moved to "+id.String(), func() (bool, string) {
		ms, _ = a.Observe(ctx(t))
		m := find(ms, id)
		return m != nil && m.Leader, fmt.Sprintf("leadership did not move to %s: %+v", id, ms)
	})
	// Move it back so the member can be removed as a follower.
	if err := a.MoveLeader(ctx(t), client, api.MemberID(cl.Members[0].Etcd.Server.MemberID())); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(ctx(t), id); err != nil {
		t.Fatalf("removing an absent member: %v", err)
	}
	// The removed member's client is closed at the next Observe that no
	// longer lists it.
	testwait.For(t, 10*time.Second, "the removed member's client closed", func() (bool, string) {
		if _, err := a.Observe(ctx(t)); err != nil {
			return false, err.Error()
		}
		urls := a.members.urls()
		return !slices.Contains(urls, client) && len(urls) == 2, fmt.Sprintf("member clients %v after removing %s", urls, client)
	})
}

func find(ms []membership.Member, id api.MemberID) *membership.Member {
	for i := range ms {
		if ms[i].ID == id {
			return &ms[i]
		}
	}
	return nil
}

// TestPromoteWithAuthAsksTheLeader: with etcd authentication on and client
// certificates as identities, a follower forwards MemberPromote to the
// leader without the caller's identity and the leader refuses it ("auth:
// user name is empty"), so Promote asks the leader, even when the voters it
// is given are followers only.
func TestPromoteWithAuthAsksTheLeader(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 2)
	if !strings.HasPrefix(cl.Members[0].ClientURL, "https://") {
		t.Skip("identities are client certificates: needs TLS (NICO_ETCDTEST_TLS)")
	}
	cli := cl.Client(t)
	if err := rbac.EnableAuth(ctx(t), cli, store.DefaultPrefix, nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	a := New(cli, time.Second)
	var leaderURL, followerURL string
	testwait.For(t, 10*time.Second, "a leader and a follower observed", func() (bool, string) {
		ms, err := a.Observe(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms {
			if m.Leader {
				leaderURL = m.ClientURLs[0]
			} else {
				followerURL = m.ClientURLs[0]
			}
		}
		return leaderURL != "" && followerURL != "", fmt.Sprintf("members %+v", ms)
	})

	peer, client := etcdtest.URLs(t)
	id, initial, err := a.AddLearner(ctx(t), "m9", peer)
	if err != nil {
		t.Fatal(err)
	}
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	if err := rt.Start(ctx(t), member.Config{Name: "m9", DataDir: t.TempDir() + "/etcd", PeerURL: peer, ClientURL: client, InitialCluster: initial, ClusterState: "existing", ClusterToken: "etcdtest", TLS: etcdtest.MemberTLS(t, "m9", peer, client)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })

	pctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	if err := a.Promote(pctx, []string{followerURL}, id, client, leaderURL, nil); err != nil {
		t.Fatalf("promote (voters: follower %s; leader %s): %v", followerURL, leaderURL, err)
	}
}

// TestRemoveThroughTheRemovedMember: a client that may send MemberRemove
// to the very member it removes learns that the removal happened, whether
// the answer came back, the member answered "stopped", or its connection
// broke as it left (a lost answer, retried: ErrMemberNotFound is done).
// Before Remove asked again on a broken connection, the removal was
// reported as failed while it had committed.
func TestRemoveThroughTheRemovedMember(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 5)
	for _, k := range []int{4, 3, 2} {
		m := cl.Members[k]
		id := api.MemberID(m.Etcd.Server.MemberID())
		// The removed member first: the client's first pick, and on a
		// broken answer the survivor is asked again.
		a := New(etcdtest.NewClient(t, m.ClientURL, cl.Members[0].ClientURL), time.Second)
		t0 := time.Now()
		if err := a.Remove(ctx(t), id); err != nil {
			t.Fatalf("remove %s through itself: %v", m.Name, err)
		}
		t.Logf("removed %s in %v", m.Name, time.Since(t0))
		a.Close()
		ms, err := New(etcdtest.NewClient(t, cl.Members[0].ClientURL), etcdtest.CallBudget).Observe(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if find(ms, id) != nil {
			t.Fatalf("member %s still listed after Remove returned: %+v", m.Name, ms)
		}
	}
}

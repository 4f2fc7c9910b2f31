package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// contractEnv is one MemberAdmin under the contract, over a cluster of two
// started voters named m0 and m1.
type contractEnv struct {
	admin MemberAdmin
	// voters are the voters' client URLs.
	voters []string
	// urls returns fresh peer and client URLs for a new member.
	urls func() (peer, client string)
	// start starts learner id as name at its URLs with its initial
	// cluster, as the joining node's agent does.
	start func(id api.MemberID, name, peer, client, initial string)
}

// TestMemberAdminContract runs one contract against etcdadmin on real etcd,
// the in-memory fake and the error-injecting fake with nothing armed.
func TestMemberAdminContract(t *testing.T) {
	t.Parallel()
	t.Run("etcd", func(t *testing.T) { memberAdminContract(t, etcdContractEnv(t)) })
	t.Run("memory", func(t *testing.T) { memberAdminContract(t, memContractEnv(newMemAdmin("m0", "m1"), nil)) })
	t.Run("faults", func(t *testing.T) {
		f := newMemAdmin("m0", "m1")
		memberAdminContract(t, memContractEnv(f, &faultAdmin{next: f}))
	})
}

func etcdContractEnv(t *testing.T) contractEnv {
	cl := etcdtest.Start(t, 2)
	a := etcdadmin.New(cl.Client(t), etcdtest.CallBudget)
	t.Cleanup(a.Close)
	return contractEnv{
		admin:  a,
		voters: cl.Endpoints(),
		urls:   func() (string, string) { return etcdtest.URLs(t) },
		start: func(_ api.MemberID, name, peer, client, initial string) {
			rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
			cfg := member.Config{Name: name, DataDir: t.TempDir() + "/etcd", PeerURL: peer, ClientURL: client, InitialCluster: initial,
				ClusterState: member.StateExisting, ClusterToken: "etcdtest", TLS: etcdtest.MemberTLS(t, name, peer, client)}
			if err := rt.Start(contractCtx(t, 30*time.Second), cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Stop(context.Background()) })
		},
	}
}

// memContractEnv is the env of memory fake f, called through admin (nil:
// f itself).
func memContractEnv(f *memAdmin, admin MemberAdmin) contractEnv {
	if admin == nil {
		admin = f
	}
	n := 0
	return contractEnv{
		admin:  admin,
		voters: []string{memClientURL("m0"), memClientURL("m1")},
		urls: func() (string, string) {
			n++
			name := fmt.Sprintf("new-%d", n)
			return memPeerURL(name), memClientURL(name)
		},
		start: func(id api.MemberID, name, _, client, _ string) {
			if err := f.start(id, name, client); err != nil {
				panic(err)
			}
		},
	}
}

// refusedWithin is how long the contract lets AddLearner wait for a
// learner slot that stays taken.
const refusedWithin = 10 * time.Second

func contractCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// observed is a's member list; the cases wait on it with testwait: etcd's
// member list is read serializably, so a follower may show a change a
// moment after the leader made it.
func observed(t *testing.T, a MemberAdmin) []membership.Member {
	t.Helper()
	ms, err := a.Observe(contractCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func memberByID(ms []membership.Member, id api.MemberID) *membership.Member {
	for i := range ms {
		if ms[i].ID == id {
			return &ms[i]
		}
	}
	return nil
}

func leaderOfMembers(ms []membership.Member) *membership.Member {
	for i := range ms {
		if ms[i].Leader {
			return &ms[i]
		}
	}
	return nil
}

// memberAdminContract is what the executor relies on from a MemberAdmin:
// a learner's whole life, and etcd's refusals, as etcd's typed errors.
func memberAdminContract(t *testing.T, env contractEnv) {
	a := env.admin
	ctx := func() context.Context { return contractCtx(t, 20*time.Second) }

	// Two healthy, started voters; one leads.
	ms := observed(t, a)
	if len(ms) != 2 {
		t.Fatalf("observed %d members, want 2: %+v", len(ms), ms)
	}
	leaders := 0
	for _, m := range ms {
		if m.Learner || !m.Healthy || !m.Started() || m.RaftIndex == 0 || len(m.ClientURLs) == 0 {
			t.Fatalf("member %+v: want a healthy, started voter with a raft index and a client URL", m)
		}
		if m.Leader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders among %+v", leaders, ms)
	}

	// A peer URL in use is refused.
	if _, _, err := a.AddLearner(ctx(), "dup", ms[0].PeerURLs[0]); !errors.Is(err, rpctypes.ErrPeerURLExist) {
		t.Fatalf("add learner at a voter's peer URL: %v, want ErrPeerURLExist", err)
	}

	// A learner: unstarted and unhealthy until its node starts it.
	peer, client := env.urls()
	id, initial, err := a.AddLearner(ctx(), "m9", peer)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"m9=" + peer, "m0=", "m1="} {
		if !strings.Contains(initial, want) {
			t.Fatalf("initial cluster %q lacks %q", initial, want)
		}
	}
	testwait.For(t, 10*time.Second, "the learner observed", func() (bool, string) {
		m := memberByID(observed(t, a), id)
		if m == nil {
			return false, "learner not observed"
		}
		if !m.Learner || m.Healthy || m.Started() {
			t.Fatalf("fresh learner %+v: want unstarted, unhealthy", *m)
		}
		return true, ""
	})

	// One learner at a time: AddLearner waits, and gives up with
	// ErrTooManyLearners when ctx ends (even when its last attempt was cut
	// short by that end). refusedWithin leaves etcd time to answer at least
	// once on a loaded machine; the call always lasts that long.
	peer2, _ := env.urls()
	short, cancel := context.WithTimeout(t.Context(), refusedWithin)
	_, _, err = a.AddLearner(short, "m10", peer2)
	cancel()
	if !errors.Is(err, rpctypes.ErrTooManyLearners) {
		t.Fatalf("second learner: %v, want ErrTooManyLearners", err)
	}

	// Promote needs voters to ask, and a learner that serves clients.
	if err := a.Promote(ctx(), nil, id, client, "", nil); err == nil {
		t.Fatal("promote with no voter to ask succeeded")
	}
	for _, url := range []string{"", client} {
		short, cancel = context.WithTimeout(t.Context(), time.Second)
		err = a.Promote(short, env.voters, id, url, "", nil)
		cancel()
		if !errors.Is(err, etcdadmin.ErrNotServing) {
			t.Fatalf("promote a learner that never started, at %q: %v, want ErrNotServing", url, err)
		}
	}

	env.start(id, "m9", peer, client, initial)
	leaderURL := leaderOfMembers(observed(t, a)).ClientURLs[0]
	var progress []uint64
	if err := a.Promote(ctx(), env.voters, id, client, leaderURL, func(i uint64) { progress = append(progress, i) }); err != nil {
		t.Fatal(err)
	}
	if len(progress) == 0 {
		t.Fatal("the learner's progress was not reported")
	}
	testwait.For(t, 10*time.Second, "a healthy voter after Promote", func() (bool, string) {
		m := memberByID(observed(t, a), id)
		if m == nil {
			t.Fatalf("member %s vanished after Promote", id)
		}
		return !m.Learner && m.Healthy, fmt.Sprintf("member %+v: want a healthy voter after Promote", *m)
	})
	if err := a.Promote(ctx(), env.voters, id, client, leaderURL, nil); !errors.Is(err, rpctypes.ErrMemberNotLearner) {
		t.Fatalf("promoting a voter: %v, want ErrMemberNotLearner", err)
	}

	// Leadership moves through the leader only, to a voter.
	ms = observed(t, a)
	lead := leaderOfMembers(ms)
	var follower *membership.Member
	for i := range ms {
		if !ms[i].Leader && ms[i].ID != id {
			follower = &ms[i]
		}
	}
	if err := a.MoveLeader(ctx(), follower.ClientURLs[0], id); !errors.Is(err, rpctypes.ErrNotLeader) {
		t.Fatalf("move leader through follower %s: %v, want ErrNotLeader", follower.Name, err)
	}
	if err := a.MoveLeader(ctx(), lead.ClientURLs[0], id); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "leadership moved to the member", func() (bool, string) {
		m := memberByID(observed(t, a), id)
		return m != nil && m.Leader, fmt.Sprintf("leadership did not move to %s", id)
	})
	if err := a.MoveLeader(ctx(), client, lead.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "leadership moved back", func() (bool, string) {
		m := memberByID(observed(t, a), lead.ID)
		return m != nil && m.Leader, fmt.Sprintf("leadership did not move back to %s", lead.Name)
	})

	// Removal; removing an absent member is no error.
	if err := a.Remove(ctx(), id); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the member gone after Remove", func() (bool, string) {
		return memberByID(observed(t, a), id) == nil, fmt.Sprintf("member %s still listed after Remove", id)
	})
	if err := a.Remove(ctx(), id); err != nil {
		t.Fatalf("removing an absent member: %v", err)
	}
}

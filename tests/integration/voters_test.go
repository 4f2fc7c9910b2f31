package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestVotersStandbysGrowAndShrink: five control-plane hosts under
// spec.voters 3 give three voters and two standbys, all five ready;
// voters 5 makes the standbys voters through the learner flow, one
// learner at a time; voters 3 sheds two voters one at a time, never the
// etcd leader while it leads, and keeps the shed hosts as standbys, whose
// node records then name no member.
func TestVotersStandbysGrowAndShrink(t *testing.T) {
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(3)
	cli := f.Client()
	removedWhileLeading := make(chan string, 1)
	f.StartCoordinator("c-1", func(c *coord) {
		c.Observer.OnMembershipStep = func(s membership.Step) {
			if s.Action != membership.RemoveMember {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			for _, ep := range f.Endpoints() {
				if st, err := cli.Status(ctx, ep); err == nil {
					if st.Leader == uint64(s.Member) {
						select {
						case removedWhileLeading <- s.Member.String():
						default:
						}
					}
					return
				}
			}
		}
	})
	mon := f.watchLearners()
	names := []string{"cp-1", "cp-2", "cp-3", "cp-4", "cp-5"}
	for _, n := range names[1:] {
		f.Start(f.AgentConfig(n, false))
	}

	voters := f.WaitVoterCount(120*time.Second, 3)
	standbys := f.waitStandbys(30*time.Second, 2)
	for _, s := range standbys {
		if slices.Contains(voters, s) {
			t.Fatalf("standby %s is a voter (voters %v)", s, voters)
		}
	}
	for _, name := range names {
		n := f.Node(name)
		testwait.For(t, 30*time.Second, name+" ready", func() (bool, string) {
			ready, err := n.Notify.ReadyState()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return ready >= 1, fmt.Sprintf("READY sent %d times", ready)
		})
	}
	t.Logf("voters %v, standbys %v", voters, standbys)

	f.SetVoters(5)
	f.WaitVoters(180*time.Second, names...)

	leader := f.EtcdLeader()
	f.SetVoters(3)
	kept := f.WaitVoterCount(120*time.Second, 3)
	if !slices.Contains(kept, leader) {
		t.Fatalf("voters %v after the shrink: the etcd leader %s was removed, not a follower", kept, leader)
	}
	select {
	case id := <-removedWhileLeading:
		t.Fatalf("member %s was removed while it led etcd", id)
	default:
	}
	// A shed voter is kept as a standby: its agent stops with ErrStandby
	// (systemd starts it again, exit 4), files a new join request and
	// waits, ready, as a standby.
	for _, name := range names {
		if slices.Contains(kept, name) {
			continue
		}
		n := f.Node(name)
		select {
		case err := <-n.Done:
			n.Done <- err
			if !errors.Is(err, agent.ErrStandby) {
				t.Fatalf("shed %s returned %v, want ErrStandby", name, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("shed %s did not stop", name)
		}
		if err := n.Stop(); !errors.Is(err, agent.ErrStandby) {
			t.Fatalf("stopping shed %s: %v", name, err)
		}
		f.Start(n.Cfg)
	}
	shed := f.waitStandbys(60*time.Second, 2)
	for _, s := range shed {
		if slices.Contains(kept, s) {
			t.Fatalf("standby %s is a voter (voters %v)", s, kept)
		}
		// Its node record names no member, though it named the voter
		// it was.
		testwait.For(t, 30*time.Second, s+"'s record a standby with no member", func() (bool, string) {
			rec := &api.Node{}
			if err := f.Store().Get(t.Context(), store.NodeKey(s), rec); err != nil {
				return false, err.Error()
			}
			return rec.Status.Phase == api.NodeStandby && rec.Status.MemberID == 0 && rec.Status.MemberState == api.MemberNone,
				fmt.Sprintf("phase %s, member %s %q", rec.Status.Phase, rec.Status.MemberID, rec.Status.MemberState)
		})
		n := f.Node(s)
		testwait.For(t, 30*time.Second, s+" ready again", func() (bool, string) {
			ready, err := n.Notify.ReadyState()
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			return ready >= 1, fmt.Sprintf("READY sent %d times", ready)
		})
	}
	if got := f.WaitVoterCount(10*time.Second, 3); !slices.Equal(got, kept) {
		t.Fatalf("voters %v once the shed hosts are standbys, want %v", got, kept)
	}
	if max := mon(); max > 1 {
		t.Fatalf("saw %d learners at once", max)
	}
	assertSerialized(t, f.ops())
}

// waitStandbys waits until n join requests are pending and marked
// Standby, and returns their nodes.
func (f *fleet) waitStandbys(within time.Duration, n int) []string {
	f.t.Helper()
	st := f.Store()
	var out []string
	testwait.For(f.t, within, fmt.Sprintf("%d standbys", n), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		joins, _, err := store.List[api.JoinRequest](ctx, st, store.JoinsDir)
		if err != nil {
			return false, err.Error()
		}
		out = out[:0]
		var seen []string
		for _, j := range joins {
			seen = append(seen, fmt.Sprintf("%s:%q standby=%v", j.Spec.Node, j.Status.Phase, j.Status.Standby))
			if j.Status.Phase == api.JoinPending && j.Status.Standby {
				out = append(out, j.Spec.Node)
			}
		}
		return len(out) == n, fmt.Sprint(seen)
	})
	return slices.Clone(out)
}

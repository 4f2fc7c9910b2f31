package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/homystack/nico/coordinator/internal/versionroll"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/switchguard"
)

// TestStaleTermMovesNoLeader: the controllers that move etcd's leadership
// (a rollout before the leader's turn, the switch guard, the etcd version
// roll) move nothing once their term ended: the step a leader planned
// before it was paused past its session's end is refused with
// ErrNotLeader, and etcd's leader stays where it was. (The membership
// controller's changes: TestStaleTermChangesNoMembership.)
func TestStaleTermMovesNoLeader(t *testing.T) {
	t.Parallel()
	e := newSwitchEnv(t)
	ctx := t.Context()
	leaderOf := func() (api.MemberID, string, api.MemberID) {
		t.Helper()
		for _, m := range e.cl.Members {
			resp, err := e.st.Client().Status(ctx, m.ClientURL)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Leader == resp.Header.MemberId {
				for _, o := range e.cl.Members {
					if o.ClientURL != m.ClientURL {
						or, err := e.st.Client().Status(ctx, o.ClientURL)
						if err != nil {
							t.Fatal(err)
						}
						return api.MemberID(resp.Leader), m.ClientURL, api.MemberID(or.Header.MemberId)
					}
				}
			}
		}
		t.Fatal("no etcd leader")
		return 0, "", 0
	}
	// ended is the dependencies of a term whose leader key is gone.
	ended := func(name string) leaderDeps {
		t.Helper()
		key := fmt.Sprintf("election/stale-%s", name)
		resp, err := e.st.Client().Put(ctx, key, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Client().Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		c := New(Config{Name: name, Clock: e.clk}, e.st, slog.New(slog.DiscardHandler))
		return c.leaderDeps(store.Fence{Key: key, Rev: resp.Header.Revision})
	}
	for name, move := range map[string]func(d leaderDeps, leaderURL string, to api.MemberID) error{
		"rollout": func(d leaderDeps, leaderURL string, to api.MemberID) error {
			ro := api.NewRollout("r")
			s := rollout.Step{Action: rollout.TransferLeader, LeaderURL: leaderURL, To: to}
			return newRollouter(d, membership.Policy{}, nil, nil).apply(ctx, ro, rollout.Observed{Rollout: ro}, nil, s, e.clk.Now())
		},
		"switch-guard": func(d leaderDeps, leaderURL string, to api.MemberID) error {
			s := switchguard.Step{Action: switchguard.TransferLeader, LeaderURL: leaderURL, To: to}
			return newSwitchGuard(d).apply(ctx, s, api.NewSwitchRequest("cp-1"), e.clk.Now())
		},
		"etcd-version": func(d leaderDeps, leaderURL string, to api.MemberID) error {
			s := versionroll.Step{Action: versionroll.TransferLeader, LeaderURL: leaderURL, To: to}
			return newVersionRoller(d).apply(ctx, s, e.clk.Now())
		},
	} {
		leader, url, to := leaderOf()
		if err := move(ended(name), url, to); !errors.Is(err, store.ErrNotLeader) {
			t.Errorf("%s: a leadership transfer in an ended term: %v, want ErrNotLeader", name, err)
		}
		if now, _, _ := leaderOf(); now != leader {
			t.Errorf("%s: etcd's leader moved from %s to %s in an ended term", name, leader, now)
		}
	}
}

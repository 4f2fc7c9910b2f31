package membership

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// live sets node's liveness.
func (o Observed) live2(node string, s LiveState, since time.Time) Observed {
	l := map[string]Liveness{}
	for k, v := range o.Liveness {
		l[k] = v
	}
	l[node] = Liveness{State: s, Since: since, Reason: "gossip"}
	o.Liveness = l
	return o
}

func TestPlanLiveness(t *testing.T) {
	replace := Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: time.Minute, ReplaceDeadMembersAfter: 5 * time.Minute}
	tests := []struct {
		name   string
		obs    Observed
		pol    Policy
		now    time.Time
		action Action
		reason string
	}{
		{name: "join waits while a voter's node is suspect", action: Wait, reason: "n2 is suspect since",
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).live2("n2", LiveSuspect, t0)},
		{name: "join waits while the joining node is suspect", action: Wait, reason: "n9 is suspect",
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).live2("n9", LiveSuspect, t0)},
		{name: "join goes on once the suspect is alive again", action: StartJoin,
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).live2("n2", LiveAlive, t0)},
		{name: "active join does not add the learner while a voter is suspect", action: Wait, reason: "n3 is suspect",
			obs: world("VVV").newcomer("n9", newPeer).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0).live2("n3", LiveSuspect, t0)},
		{name: "promotion waits while a voter is suspect", action: Wait, reason: "n1 is suspect",
			obs: world("VVVL").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0).live2("n1", LiveSuspect, t0)},
		{name: "a learner catching up while its promotion waits on a suspect is not aborted", action: Wait, reason: "n1 is suspect", pol: replace, now: t0.Add(time.Hour),
			obs: world("VVVL").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0).live2("n1", LiveSuspect, t0).with(func(o *Observed) { o.Members[3].RaftIndex = 9 })},
		{name: "removal request waits while another voter is suspect", action: Wait, reason: "n2 is suspect",
			obs: world("VVVVV").remove("n5", false, t0).live2("n2", LiveSuspect, t0)},
		{name: "the suspect node itself may be removed", action: StartRemove,
			obs: world("VVVVV").remove("n5", false, t0).live2("n5", LiveSuspect, t0)},
		{name: "forced removal does not wait for a suspect", action: StartRemove,
			obs: world("VVVVV").remove("n5", true, t0).live2("n2", LiveSuspect, t0)},
		{name: "active removal waits while another voter is suspect", action: Wait, reason: "n4 is suspect",
			obs: world("VVVVV").active(api.OpRemove, "n5", "http://10.0.0.5:2380", api.StepRemoveMember, 5, t0).live2("n4", LiveSuspect, t0)},
		{name: "a dead member counts as unhealthy: removing another healthy voter loses quorum", action: RefuseRemove, reason: "unsafe",
			obs: world("VVV").remove("n3", false, t0).live2("n2", LiveDead, t0)},
		{name: "a dead member counts as unhealthy: joins wait below quorum", action: Wait, reason: "not healthy",
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).live2("n2", LiveDead, t0).live2("n3", LiveDead, t0)},
		{name: "dead voters are kept when the policy is off", action: None, pol: DefaultPolicy, now: t0.Add(time.Hour),
			obs: world("VVV").live2("n3", LiveDead, t0)},
		{name: "a voter dead less than replaceDeadMembersAfter is kept", action: None, pol: replace, now: t0.Add(4 * time.Minute),
			obs: world("VVV").live2("n3", LiveDead, t0)},
		{name: "a voter dead longer than replaceDeadMembersAfter is filed for removal", action: FileRemoval, reason: "n3 is dead for 5m0s", pol: replace, now: t0.Add(5 * time.Minute),
			obs: world("VVV").live2("n3", LiveDead, t0)},
		{name: "a dead voter is not replaced when removing it loses quorum", action: Wait, reason: "cannot be replaced", pol: replace, now: t0.Add(time.Hour),
			obs: world("VV").live2("n2", LiveDead, t0)},
		{name: "two dead voters of three are not replaced: no quorum to remove them", action: Wait, reason: "no healthy quorum", pol: replace, now: t0.Add(time.Hour),
			obs: world("VVV").live2("n2", LiveDead, t0).live2("n3", LiveDead, t0)},
		{name: "a dead voter is not replaced while another is suspect", action: Wait, reason: "n1 is suspect", pol: replace, now: t0.Add(time.Hour),
			obs: world("VVVVV").live2("n5", LiveDead, t0).live2("n1", LiveSuspect, t0)},
		{name: "a dead voter whose removal is pending is not filed again", action: StartRemove, pol: replace, now: t0.Add(time.Hour),
			obs: world("VVV").live2("n3", LiveDead, t0).remove("n3", false, t0)},
		{name: "dead learners are left to the join timeouts", action: None, pol: replace, now: t0.Add(time.Hour),
			obs: world("VVVN").live2("n4", LiveDead, t0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := tc.pol
			if pol == (Policy{}) {
				pol = DefaultPolicy
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			s := Plan(tc.obs, pol, now)
			if s.Action != tc.action || !strings.Contains(s.Reason, tc.reason) {
				t.Fatalf("step = %s, want %s with reason containing %q", s, tc.action, tc.reason)
			}
		})
	}
}

func TestPlanDoesNotChangeObservedMembers(t *testing.T) {
	obs := world("VVV").live2("n2", LiveDead, t0)
	Plan(obs, DefaultPolicy, t0)
	if !obs.Members[1].Healthy {
		t.Fatal("Plan wrote to the caller's members")
	}
}

// TestCombineLiveness is the liveness rule, case by case: gossip decides,
// except that a node the mesh calls dead or left while its etcd member
// answers and its lease is live is alive.
func TestCombineLiveness(t *testing.T) {
	g, l := t0, t0.Add(time.Second)
	for _, tc := range []struct {
		gossip string
		lease  bool
		member bool
		want   LiveState
		since  time.Time
		reason string
	}{
		{GossipDead, true, false, LiveDead, g, "gossip"},
		{GossipDead, false, true, LiveDead, g, "gossip"},
		{GossipDead, false, false, LiveDead, g, "gossip"},
		{GossipDead, true, true, LiveAlive, g, "etcd member answers, lease live; gossip dead"},
		{GossipLeft, true, false, LiveDead, g, "gossip left"},
		{GossipLeft, false, true, LiveDead, g, "gossip left"},
		{GossipLeft, true, true, LiveAlive, g, "etcd member answers, lease live; gossip left"},
		{GossipSuspect, true, true, LiveSuspect, g, "gossip"},
		{GossipSuspect, true, false, LiveSuspect, g, "gossip"},
		{GossipSuspect, false, false, LiveSuspect, g, "gossip"},
		{GossipAlive, true, false, LiveAlive, g, "gossip"},
		{GossipAlive, true, true, LiveAlive, g, "gossip"},
		{GossipAlive, false, true, LiveSuspect, l, "lease expired, gossip alive"},
		{GossipAlive, false, false, LiveSuspect, l, "lease expired, gossip alive"},
		{"", true, false, LiveAlive, l, "lease"},
		{"", true, true, LiveAlive, l, "lease"},
		{"", false, true, LiveDead, l, "lease"},
		{"", false, false, LiveDead, l, "lease"},
	} {
		got := CombineLiveness(Signals{Gossip: tc.gossip, GossipSince: g, LeaseLive: tc.lease, LeaseSince: l, MemberAnswers: tc.member})
		if got.State != tc.want || !got.Since.Equal(tc.since) || got.Reason != tc.reason {
			t.Errorf("gossip %q lease %v member answers %v: got %+v, want %s since %s (%q)", tc.gossip, tc.lease, tc.member, got, tc.want, tc.since, tc.reason)
		}
	}
}

package membership

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// voters sets spec.voters.
func (o Observed) voters(n int) Observed { o.Cluster.Voters = n; return o }

// standby registers node name (n<id>) at registered, with a join request
// filed at requested; marked says whether it is marked a standby already.
func (o Observed) standby(id int, registered, requested time.Time, marked bool) Observed {
	name, peer := fmt.Sprintf("n%d", id), fmt.Sprintf("http://10.0.0.%d:2380", id)
	o = o.newcomer(name, peer)
	o.Nodes[len(o.Nodes)-1].Metadata.CreatedAt = registered
	o = o.join(name, peer, requested)
	o.Joins[len(o.Joins)-1].Status.Standby = marked
	return o
}

// zones labels the nodes with topology domains, "n1=a" style.
func (o Observed) zones(pairs ...string) Observed {
	for _, p := range pairs {
		name, zone, _ := strings.Cut(p, "=")
		for _, n := range o.Nodes {
			if n.Metadata.Name == name {
				n.Spec.Labels = map[string]string{api.LabelTopology: zone}
			}
		}
	}
	return o
}

// TestShedVotersStayStandbys: a voter shed because spec.voters was lowered
// is removed as a standby (not released); a dead voter's removal is a
// plain one.
func TestShedVotersStayStandbys(t *testing.T) {
	if s := Plan(world("VVVVV").voters(3), DefaultPolicy, t0); s.Action != FileRemoval || !s.Standby {
		t.Fatalf("shrink: %v standby=%v, want FileRemoval keeping the node a standby", s, s.Standby)
	}
	replace := Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: time.Minute, ReplaceDeadMembersAfter: time.Minute}
	if s := Plan(world("VVV").voters(3).live2("n3", LiveDead, t0), replace, t0.Add(time.Hour)); s.Action != FileRemoval || s.Standby {
		t.Fatalf("dead voter: %v standby=%v, want a plain FileRemoval", s, s.Standby)
	}
}

func TestPlanVoters(t *testing.T) {
	replace := Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: time.Minute, ReplaceDeadMembersAfter: 5 * time.Minute}
	tests := []struct {
		name    string
		obs     Observed
		pol     Policy
		now     time.Time
		action  Action
		request string // the node the step concerns ("": not checked)
		reason  string
	}{
		// Standbys.
		{name: "a host beyond spec.voters is marked a standby", action: MarkStandby, request: "n9", reason: "3 of 3 voters",
			obs: world("VVV").voters(3).standby(9, t0, t0, false)},
		{name: "a marked standby is left alone", action: None,
			obs: world("VVV").voters(3).standby(9, t0, t0, true)},
		{name: "only the unmarked of two standbys is marked", action: MarkStandby, request: "n8",
			obs: world("VVV").voters(3).standby(9, t0, t0, true).standby(8, t0, t0.Add(time.Second), false)},
		{name: "the default of three voters applies when spec.voters is unset", action: MarkStandby, request: "n9",
			obs: world("VVV").voters(0).standby(9, t0, t0, false)},
		{name: "a learner on its way counts: the next host is a standby", action: MarkStandby, request: "n9",
			obs: world("VVN").voters(3).standby(9, t0, t0, false)},
		{name: "a request whose learner exists already resumes though the count is reached", action: StartJoin, request: "n4",
			obs: world("VVVL").voters(3).join("n4", "http://10.0.0.4:2380", t0)},

		// Grow.
		{name: "a single voter grows through two", action: StartJoin, request: "n9",
			obs: world("V").voters(3).standby(9, t0, t0, false)},
		{name: "two voters grow to three", action: StartJoin, request: "n9",
			obs: world("VV").voters(3).standby(9, t0, t0, true)},
		{name: "raising spec.voters grows from a standby", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(9, t0, t0, true)},
		{name: "an even cluster grows to the odd count", action: StartJoin, request: "n9",
			obs: world("VVVV").voters(5).standby(9, t0, t0, true)},
		{name: "a grow adds one learner at a time", action: Wait, reason: "one learner at a time",
			obs: world("VVVL").voters(5).standby(9, t0, t0, true)},
		{name: "no standby: nothing to grow from", action: None, obs: world("VVV").voters(5)},
		{name: "a grow waits while the cluster lacks quorum", action: Wait, reason: "not healthy",
			obs: world("VUU").voters(5).standby(9, t0, t0, true)},

		// Standby selection.
		{name: "an alive standby before a suspect one", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0.Add(time.Hour), true).live2("n8", LiveSuspect, t0)},
		{name: "a standby without heartbeat is never picked", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0.Add(time.Hour), true).with(func(o *Observed) { o.Alive["n8"] = false })},
		{name: "a dead standby is never picked", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0.Add(time.Hour), true).live2("n8", LiveDead, t0)},
		{name: "the longest registered standby first, though it asked later", action: StartJoin, request: "n8",
			obs: world("VVV").voters(5).standby(9, t0.Add(time.Hour), t0, true).standby(8, t0, t0.Add(time.Minute), true)},
		{name: "without topology labels age decides", action: StartJoin, request: "n8",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0, true)},
		{name: "with topology labels the domain with the fewest voters wins over age", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0, true).
				zones("n1=a", "n2=a", "n3=b", "n8=a", "n9=c")},
		{name: "with topology labels a domain with fewer voters beats a crowded one", action: StartJoin, request: "n9",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0, true).
				zones("n1=a", "n2=a", "n3=b", "n8=a", "n9=b")},
		{name: "in one domain age decides again", action: StartJoin, request: "n8",
			obs: world("VVV").voters(5).standby(8, t0, t0, true).standby(9, t0.Add(time.Hour), t0, true).
				zones("n1=a", "n2=b", "n3=c", "n8=d", "n9=d")},

		// Shrink.
		{name: "lowering spec.voters files the removal of a follower", action: FileRemoval, request: "n2", reason: "5 voters, spec.voters is 3",
			obs: world("VVVVV").voters(3)},
		{name: "an even cluster shrinks to the odd count", action: FileRemoval, request: "n2",
			obs: world("VVVV").voters(3)},
		{name: "an unhealthy voter is shed first", action: FileRemoval, request: "n4",
			obs: world("VVVUV").voters(3)},
		{name: "a dead voter is shed first", action: FileRemoval, request: "n5",
			obs: world("VVVVV").voters(3).live2("n5", LiveDead, t0)},
		{name: "a claimed VM is shed before a host that came on its own", action: FileRemoval, request: "n4",
			obs: world("VVVVV").voters(3).with(func(o *Observed) { o.Claimed = map[string]bool{"n4": true} })},
		{name: "a claimed VM that leads is shed after the followers", action: FileRemoval, request: "n2",
			obs: world("VVVVV").voters(3).with(func(o *Observed) { o.Claimed = map[string]bool{"n1": true} })},
		{name: "the follower in the most crowded domain is shed", action: FileRemoval, request: "n3",
			obs: world("VVVVV").voters(3).zones("n1=a", "n2=b", "n3=c", "n4=c", "n5=d")},
		{name: "a follower is shed before the leader of the same crowded domain", action: FileRemoval, request: "n2",
			obs: world("VVVVV").voters(3).zones("n1=a", "n2=a", "n3=b", "n4=c", "n5=d")},
		{name: "a follower of the leader's crowded domain is shed, not the leader", action: FileRemoval, request: "n1",
			obs: world("VVVVV").voters(3).zones("n1=a", "n2=b", "n3=a", "n4=a", "n5=c").with(func(o *Observed) {
				o.Members[0].Leader, o.Members[3].Leader = false, true
			})},
		{name: "the youngest follower is shed among equals", action: FileRemoval, request: "n3",
			obs: world("VVVVV").voters(3).with(func(o *Observed) {
				for i, n := range o.Nodes {
					n.Metadata.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
				}
				o.Nodes[2].Metadata.CreatedAt = t0.Add(time.Hour)
			})},
		{name: "a shrink never removes the last healthy voter", action: Wait, reason: "unsafe",
			obs: world("VG").voters(1)},
		{name: "a shrink waits while a removal is pending", action: None,
			obs: world("VVVVV").voters(3).remove("n5", false, t0).with(func(o *Observed) { o.Removals[0].Status.Phase = api.RemoveRunning })},
		{name: "a shrink waits while a learner is in the cluster", action: None, obs: world("VVVVVN").voters(3)},
		{name: "a shrink waits while an operation is in flight", action: AddLearner,
			obs: world("VVVVV").voters(3).newcomer("n9", newPeer).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0)},
		{name: "a shrink waits while a voter is suspect", action: Wait, reason: "n3 is suspect",
			obs: world("VVVVV").voters(3).live2("n3", LiveSuspect, t0)},
		{name: "at the count nothing is shed", action: None, obs: world("VVVVV").voters(5)},

		// Dead replacement.
		{name: "a dead voter is removed before a standby is added", action: FileRemoval, request: "n3", pol: replace, now: t0.Add(time.Hour),
			obs: world("VVV").voters(5).standby(9, t0, t0, true).live2("n3", LiveDead, t0)},
		{name: "once the dead voter is gone a standby replaces it", action: StartJoin, request: "n9", pol: replace, now: t0.Add(time.Hour),
			obs: world("VV").voters(3).standby(9, t0, t0, true)},
		{name: "a dead voter is not yet replaced before replaceDeadMembersAfter", action: None, pol: replace, now: t0.Add(time.Minute),
			obs: world("VVV").voters(3).standby(9, t0, t0, true).live2("n3", LiveDead, t0)},
		{name: "a dead voter is not replaced when that costs quorum, nor is a standby added", action: Wait, pol: replace, now: t0.Add(time.Hour),
			obs: world("VVV").voters(3).standby(9, t0, t0, true).live2("n2", LiveDead, t0).live2("n3", LiveDead, t0)},
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
			if s.Action != tc.action || (tc.request != "" && s.Request != tc.request) || !strings.Contains(s.Reason, tc.reason) {
				t.Fatalf("step = %v, want %s node=%q with reason containing %q", s, tc.action, tc.request, tc.reason)
			}
		})
	}
}

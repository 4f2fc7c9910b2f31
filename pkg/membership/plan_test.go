package membership

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world builds an Observed from a member spec (see cluster) with a live,
// registered node for every non-ghost member. It asks for 7 voters, so
// that every joining host is wanted as a voter; plan_voters_test.go sets
// its own count.
func world(spec string) Observed {
	obs := Observed{Members: cluster(spec), Alive: map[string]bool{}, Cluster: api.EtcdClusterSpec{Voters: 7}}
	for _, m := range obs.Members {
		if m.Node == "" {
			continue
		}
		n := api.NewNode(m.Node)
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		n.Spec.PeerURL, n.Spec.ClientURL = m.PeerURLs[0], fmt.Sprintf("http://10.0.0.%d:2379", m.ID)
		obs.Nodes = append(obs.Nodes, n)
		obs.Alive[m.Node] = true
	}
	return obs
}

// newcomer registers a live node that has no member yet.
func (o Observed) newcomer(name, peer string) Observed {
	n := api.NewNode(name)
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.PeerURL = peer
	o.Nodes = append(o.Nodes, n)
	o.Alive[name] = true
	return o
}

func (o Observed) join(name, peer string, at time.Time) Observed {
	j := api.NewJoinRequest(name)
	j.Metadata.CreatedAt = at
	j.Spec = api.JoinRequestSpec{Node: name, PeerURL: peer, ClientURL: strings.Replace(peer, "2380", "2379", 1), Attempt: 1}
	o.Joins = append(o.Joins, j)
	return o
}

func (o Observed) remove(name string, force bool, at time.Time) Observed {
	r := api.NewRemoveRequest(name)
	r.Metadata.CreatedAt = at
	r.Spec.Force = force
	o.Removals = append(o.Removals, r)
	return o
}

func (o Observed) active(t api.OpType, node, peer string, step api.OpStep, member api.MemberID, since time.Time) Observed {
	op := newOp(since, t, node)
	op.Spec.Request, op.Spec.PeerURL, op.Spec.MemberID = node, peer, member
	op.Status.Step = step
	o.Active = op
	return o
}

func (o Observed) with(f func(*Observed)) Observed { f(&o); return o }

const newPeer = "http://10.0.0.9:2380"

func TestPlan(t *testing.T) {
	min := time.Minute
	tests := []struct {
		name   string
		obs    Observed
		now    time.Time
		action Action
		check  func(t *testing.T, s Step)
	}{
		{name: "idle cluster does nothing", obs: world("VVV"), action: None},
		{
			name: "no join while NOSPACE is raised", action: Wait,
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).with(noSpace),
			check: func(t *testing.T, s Step) {
				if !strings.Contains(s.Reason, "NOSPACE alarm is raised (reported by n1, n2, n3)") {
					t.Fatalf("reason %q", s.Reason)
				}
			},
		},
		{name: "no removal while NOSPACE is raised", action: Wait, obs: world("VVVV").remove("n4", false, t0).with(noSpace)},
		{
			name: "a join in flight waits at its step while NOSPACE is raised", action: Wait,
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0).with(noSpace),
			check: func(t *testing.T, s Step) {
				if s.Op == nil || !strings.Contains(s.Reason, "NOSPACE") {
					t.Fatalf("step %+v", s)
				}
			},
		},
		{
			name: "join request starts a journaled join", obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0), action: StartJoin,
			check: func(t *testing.T, s Step) {
				if s.Op == nil || s.Op.Spec.Type != api.OpJoin || s.Op.Status.Step != api.StepAddLearner || s.Op.Spec.PeerURL != newPeer || s.Op.Status.Phase != api.OpRunning {
					t.Fatalf("op = %+v", s.Op)
				}
				if !strings.Contains(s.Op.Metadata.Name, "join-n9") {
					t.Fatalf("op name = %q", s.Op.Metadata.Name)
				}
			},
		},
		{
			name: "join from a node without heartbeat waits", action: None,
			obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).with(func(o *Observed) { o.Alive["n9"] = false }),
		},
		{name: "join from an unregistered node is ignored", obs: world("VVV").join("n9", newPeer, t0), action: None},
		{
			name: "oldest of two join requests goes first", action: StartJoin,
			obs: world("VVV").newcomer("n9", newPeer).newcomer("n8", "http://10.0.0.8:2380").join("n9", newPeer, t0.Add(time.Second)).join("n8", "http://10.0.0.8:2380", t0),
			check: func(t *testing.T, s Step) {
				if s.Request != "n8" {
					t.Fatalf("started %s, want n8", s.Request)
				}
			},
		},
		{
			name: "second learner is never added", obs: world("VVVL").newcomer("n9", newPeer).join("n9", newPeer, t0), action: Wait,
			check: reason("one learner at a time"),
		},
		{
			name: "join waits while the cluster lacks quorum", obs: world("VUU").newcomer("n9", newPeer).join("n9", newPeer, t0), action: Wait,
			check: reason("not healthy"),
		},
		{
			name: "join of a peer that is already a voter finishes", action: FinishJoin,
			obs: world("VVV").join("n3", "http://10.0.0.3:2380", t0),
		},
		{
			name: "active join adds the learner", obs: world("VVV").newcomer("n9", newPeer).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0), action: AddLearner,
		},
		{
			name: "new leader adopts a learner the old one added before journaling", action: AdoptLearner,
			obs: world("VVV").newcomer("n9", newPeer).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0).with(func(o *Observed) {
				o.Members = append(o.Members, Member{ID: 99, PeerURLs: []string{newPeer}, Learner: true})
			}),
			check: func(t *testing.T, s Step) {
				if s.Member != 99 {
					t.Fatalf("member = %v", s.Member)
				}
			},
		},
		{
			name: "active op blocks other requests", action: AddLearner,
			obs: world("VVV").newcomer("n9", newPeer).active(api.OpJoin, "n9", newPeer, api.StepAddLearner, 0, t0).remove("n2", false, t0),
		},
		{
			name: "a rollout step in flight blocks joins and removals", action: Wait,
			obs:   world("VVV").newcomer("n9", newPeer).active(api.OpRolloutStep, "n1", "", "", 0, t0).remove("n2", false, t0),
			check: reason("rollout step"),
		},
		{
			name: "a defragmentation in flight blocks joins and removals", action: Wait,
			obs:   world("VVV").newcomer("n9", newPeer).active(api.OpDefrag, "n1", "", "", 0, t0).remove("n2", false, t0),
			check: reason("defragmentation"),
		},
		{
			name: "a host's switch in flight blocks joins and removals", action: Wait,
			obs:   world("VVV").newcomer("n9", newPeer).active(api.OpSwitch, "n1", "", api.StepSwitching, 0, t0).remove("n2", false, t0),
			check: reason("switch of n1"),
		},
		{
			// A voter that does not serve counts against quorum: the
			// learner is promoted only once its member answers its status
			// (it may need a write to publish itself: the nudge).
			name: "unstarted learner is not promoted", now: t0.Add(100 * time.Millisecond), action: Wait,
			obs: learnerWorld(false, t0),
			check: func(t *testing.T, s Step) {
				if s.Member != 4 || s.Nudge || !strings.Contains(s.Reason, "does not serve clients") {
					t.Fatalf("step = %v nudge=%v, want a wait on n4's serving, no nudge yet", s, s.Nudge)
				}
			},
		},
		{
			name: "learner unstarted past NudgeAfter waits with a nudge", now: t0.Add(NudgeAfter), action: Wait,
			obs:   learnerWorld(false, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, true) },
		},
		{
			name: "unstarted learner within its timeout still waits, nudged", now: t0.Add(2*min - time.Second), action: Wait,
			obs:   learnerWorld(false, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, true) },
		},
		{
			name: "learner whose name shows but that does not answer waits, nudged", now: t0.Add(time.Minute), action: Wait,
			obs:   world("VVVN").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, true); reason("does not serve clients")(t, s) },
		},
		{
			// Three serving voters would keep quorum with a fourth that
			// does not serve; it is still not promoted.
			name: "learner that does not serve is not promoted even where quorum would hold", now: t0.Add(time.Second), action: Wait,
			obs:   world("VVVN").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0),
			check: reason("does not serve clients"),
		},
		{
			name: "one voter and a learner that does not serve: no promotion", now: t0.Add(time.Second), action: Wait,
			obs:   world("VN").active(api.OpJoin, "n2", "http://10.0.0.2:2380", api.StepLearner, 2, t0),
			check: reason("does not serve clients"),
		},
		{
			name: "one voter and a serving learner: promoted", now: t0.Add(time.Second), action: Promote,
			obs: world("VL").active(api.OpJoin, "n2", "http://10.0.0.2:2380", api.StepLearner, 2, t0),
		},
		{
			name: "started learner that answers gets no nudge", now: t0.Add(time.Minute), action: Promote,
			obs:   learnerWorld(true, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, false) },
		},
		{
			name: "no nudge while the cluster lacks quorum", now: t0.Add(time.Minute), action: Wait,
			obs:   world("VUUX").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, false) },
		},
		{
			name: "unstarted learner held by a suspect node is nudged while it waits", now: t0.Add(time.Minute), action: Wait,
			obs:   learnerWorld(false, t0).live2("n2", LiveSuspect, t0),
			check: func(t *testing.T, s Step) { wantNudge(t, s, true) },
		},
		{
			name: "learner that never starts is aborted and its node told to retry", now: t0.Add(2 * min), action: AbortJoin,
			obs: learnerWorld(false, t0),
			check: func(t *testing.T, s Step) {
				if !s.Retry || s.Member != 4 || !strings.Contains(s.Reason, "did not start within 2m0s") {
					t.Fatalf("step = %v retry=%v", s, s.Retry)
				}
			},
		},
		{
			name: "started learner is promoted through voters, leader first", now: t0.Add(time.Second), action: Promote,
			obs: learnerWorld(true, t0),
			check: func(t *testing.T, s Step) {
				if len(s.Voters) != 3 || s.Voters[0] != "http://10.0.0.1:2379" || s.LeaderURL != s.Voters[0] || s.LearnerURL != "http://10.0.0.4:2379" {
					t.Fatalf("voters=%v leader=%q learner=%q", s.Voters, s.LeaderURL, s.LearnerURL)
				}
			},
		},
		{
			name: "learner making progress is not aborted", now: t0.Add(3 * min), action: Promote,
			obs: learnerWorld(true, t0).with(func(o *Observed) { o.Active.Status.ProgressAt = t0.Add(2 * min) }),
		},
		{
			name: "learner that stalls is aborted", now: t0.Add(5 * min), action: AbortJoin,
			obs: learnerWorld(true, t0).with(func(o *Observed) {
				o.Active.Status.ProgressAt, o.Active.Status.LearnerIndex = t0.Add(2*min), o.Members[3].RaftIndex
			}),
			check: reason("no progress for 3m0s"),
		},
		{
			name: "learner past the journaled index while its promotion was held is not aborted", now: t0.Add(5 * min), action: Promote,
			obs: learnerWorld(true, t0).with(func(o *Observed) {
				o.Active.Status.ProgressAt, o.Active.Status.LearnerIndex = t0.Add(2*min), 40
				o.Members[3].RaftIndex = 41
			}),
		},
		{
			name: "promotion that would lose quorum waits", now: t0, action: Wait,
			obs: learnerWorld(true, t0).with(func(o *Observed) {
				o.Members[1].Healthy, o.Members[2].Healthy = false, false
				o.Members = append(o.Members[:3], Member{ID: 5, Name: "n5", Node: "n5", PeerURLs: []string{"p5"}, Healthy: false}, o.Members[3])
			}),
			check: reason("promotion unsafe"),
		},
		{
			name: "promoted learner finishes the join", action: FinishJoin,
			obs: learnerWorld(true, t0).with(func(o *Observed) { o.Members[3].Learner = false }),
		},
		{
			name: "learner removed behind nico's back fails the op", action: FailOp,
			obs: learnerWorld(true, t0).with(func(o *Observed) { o.Members = o.Members[:3] }),
			check: func(t *testing.T, s Step) {
				if !s.Retry {
					t.Fatal("node not told to retry")
				}
			},
		},
		{name: "removal of an unknown node is refused", obs: world("VVV").remove("ghost", false, t0), action: RefuseRemove, check: reason(`no node or member named "ghost"`)},
		{name: "the last member is never removed", obs: world("V").remove("n1", true, t0), action: RefuseRemove, check: reason("last voting member")},
		{name: "removal that loses quorum is refused with its reason", obs: world("VVU").remove("n2", false, t0), action: RefuseRemove, check: reason("n3 is unhealthy")},
		{name: "removal counting a ghost against quorum is refused", obs: world("VVG").remove("n1", false, t0), action: RefuseRemove, check: reason("no registered node")},
		{name: "forced removal skips the quorum check", obs: world("VVU").remove("n2", true, t0), action: StartRemove},
		{
			name: "safe removal starts a journaled removal", obs: world("VVV").remove("n2", false, t0), action: StartRemove,
			check: func(t *testing.T, s Step) {
				if s.Op.Spec.Type != api.OpRemove || s.Op.Spec.MemberID != 2 || s.Op.Status.Step != api.StepRemoveMember {
					t.Fatalf("op = %+v", s.Op.Spec)
				}
			},
		},
		{name: "removals go before joins", obs: world("VVV").newcomer("n9", newPeer).join("n9", newPeer, t0).remove("n2", false, t0.Add(time.Second)), action: StartRemove},
		{name: "removal of a node with no member starts (and will finish at once)", obs: world("VVV").newcomer("w1", "").remove("w1", false, t0), action: StartRemove},
		{name: "removal op of a memberless node finishes", obs: world("VVV").newcomer("w1", "").active(api.OpRemove, "w1", "", api.StepRemoveMember, 0, t0), action: FinishRemove},
		{name: "removal op of a follower removes it", obs: world("VVV").active(api.OpRemove, "n2", "", api.StepRemoveMember, 2, t0), action: RemoveMember},
		{
			name: "removal op of the leader moves leadership first, to the most caught-up healthy voter", action: TransferLeader,
			obs: world("VVVU").active(api.OpRemove, "n1", "", api.StepRemoveMember, 1, t0).with(func(o *Observed) { o.Members[2].RaftIndex = 200; o.Members[3].RaftIndex = 300 }),
			check: func(t *testing.T, s Step) {
				if s.To != 3 || s.LeaderURL != "http://10.0.0.1:2379" {
					t.Fatalf("to=%v leaderURL=%q", s.To, s.LeaderURL)
				}
			},
		},
		{
			name: "leader is not removed when no voter can take over", action: FailOp, check: reason("no healthy voter can take leadership"),
			obs: world("VUG").active(api.OpRemove, "n1", "", api.StepRemoveMember, 1, t0).with(func(o *Observed) { o.Active.Spec.Force = true }),
		},
		{name: "removal op whose member is gone finishes", obs: world("VV").active(api.OpRemove, "n3", "", api.StepRemoveMember, 3, t0), action: FinishRemove},
		{name: "removal op re-checks quorum at every step", obs: world("VVU").active(api.OpRemove, "n2", "", api.StepRemoveMember, 2, t0), action: FailOp, check: reason("unsafe")},
		{name: "removal op waits while etcd has no leader", obs: world("VVV").active(api.OpRemove, "n3", "", api.StepRemoveMember, 3, t0).with(func(o *Observed) { o.Members[0].Leader = false }), action: Wait},
		{name: "unknown op type fails", obs: world("VVV").active("Resize", "n3", "", api.StepRemoveMember, 3, t0), action: FailOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			if now.IsZero() {
				now = t0
			}
			s := Plan(tt.obs, DefaultPolicy, now)
			if s.Action != tt.action {
				t.Fatalf("action = %s, want %s (%s)", s.Action, tt.action, s)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// learnerWorld: voters n1..n3 and learner n4 (ID 4) of an active join op
// whose learner step started at since.
func learnerWorld(started bool, since time.Time) Observed {
	spec := "VVVX"
	if started {
		spec = "VVVL"
	}
	return world(spec).active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, since)
}

func wantNudge(t *testing.T, s Step, want bool) {
	t.Helper()
	if s.Nudge != want {
		t.Fatalf("step %v: nudge = %v, want %v", s, s.Nudge, want)
	}
}

func reason(want string) func(t *testing.T, s Step) {
	return func(t *testing.T, s Step) {
		t.Helper()
		if !strings.Contains(s.Reason, want) {
			t.Fatalf("reason = %q, want it to contain %q", s.Reason, want)
		}
	}
}

func TestPlanIsPure(t *testing.T) {
	obs := world("VVVL").newcomer("n9", newPeer).join("n9", newPeer, t0)
	a := Plan(obs, DefaultPolicy, t0)
	b := Plan(obs, DefaultPolicy, t0)
	if a.String() != b.String() {
		t.Fatalf("same input, different plans: %s vs %s", a, b)
	}
}

// TestNamedLearnerIsJudgedOnProgressOnlyOnceItAnswered: a learner the
// cluster names but that answers nobody (etcd lost its first publish; it
// retries after its 6 s publish timeout) is bounded by the start timeout,
// not the progress timeout, which would abort it while it publishes.
func TestNamedLearnerIsJudgedOnProgressOnlyOnceItAnswered(t *testing.T) {
	pol := Policy{LearnerStartTimeout: 2 * time.Minute, LearnerProgressTimeout: 10 * time.Second}
	named := world("VVVN").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0)
	if s := Plan(named, pol, t0.Add(30*time.Second)); s.Action == AbortJoin {
		t.Fatalf("named learner that has not answered yet, 30 s after its add: %s, want no abort before the start timeout", s)
	}
	if s := Plan(named, pol, t0.Add(3*time.Minute)); s.Action != AbortJoin || !strings.Contains(s.Reason, "did not answer within 2m0s") {
		t.Fatalf("named learner that never answered, past the start timeout: %s, want AbortJoin", s)
	}
	answered := learnerWorld(true, t0).with(func(o *Observed) { o.Active.Status.LearnerIndex = o.Members[3].RaftIndex })
	if s := Plan(answered, pol, t0.Add(30*time.Second)); s.Action != AbortJoin || !strings.Contains(s.Reason, "no progress") {
		t.Fatalf("learner that answered and then stalled past the progress timeout: %s, want AbortJoin", s)
	}
}

// noSpace marks every member as reporting NOSPACE, as etcd's Status does
// on all members once one raised it (and so unhealthy).
func noSpace(o *Observed) {
	for i := range o.Members {
		o.Members[i].NoSpace, o.Members[i].Healthy = true, false
	}
}

package membership

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

const (
	extPeer   = "http://10.0.1.1:2380"
	extClient = "http://10.0.1.1:2379"
	extID     = api.MemberID(50)
)

// declare adds external member name at extPeer to the spec.
func (o Observed) declare(name string) Observed {
	o.Cluster.Members = append(o.Cluster.Members, api.EtcdMemberSpec{Name: name, Kind: api.MemberExternal, PeerURLs: []string{extPeer}, ClientURLs: []string{extClient}})
	return o
}

// onboard records external member name at extPeer as nico's.
func (o Observed) onboard(name string) Observed {
	if o.Onboarded == nil {
		o.Onboarded = map[string]string{}
	}
	o.Onboarded[name] = extPeer
	return o
}

// extMember adds the external member at extPeer: "V" a healthy voter, "L"
// a started learner, "X" an unstarted one, "U" an unhealthy voter, "*" a
// leading healthy voter.
func (o Observed) extMember(kind string) Observed {
	m := Member{ID: extID, Name: "ext", PeerURLs: []string{extPeer}, ClientURLs: []string{extClient}, Healthy: true, RaftIndex: 100}
	switch kind {
	case "L":
		m.Learner = true
	case "X":
		m.Learner, m.Healthy, m.Name, m.ClientURLs = true, false, "", nil
	case "U":
		m.Healthy = false
	case "*":
		for i := range o.Members {
			o.Members[i].Leader = false
		}
		m.Leader = true
	}
	o.Members = append(append([]Member(nil), o.Members...), m)
	return o
}

// activeExt makes an external member's operation of type t active.
func (o Observed) activeExt(t api.OpType, step api.OpStep, member api.MemberID, since time.Time) Observed {
	op := newOp(since, t, "ext")
	op.Spec.External, op.Spec.PeerURL, op.Spec.MemberID = true, extPeer, member
	op.Status.Step = step
	o.Active = op
	return o
}

func TestPlanExternal(t *testing.T) {
	pol := Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: time.Minute}
	tests := []struct {
		name   string
		obs    Observed
		now    time.Time
		action Action
		check  func(t *testing.T, s Step)
	}{
		// On-boarding.
		{
			name: "declared external member starts an external join", obs: world("VVV").declare("ext"), action: StartJoin,
			check: func(t *testing.T, s Step) {
				op := s.Op
				if op == nil || op.Spec.Type != api.OpJoin || !op.Spec.External || op.Spec.Node != "ext" || op.Spec.PeerURL != extPeer ||
					op.Spec.ClientURL != extClient || op.Spec.Request != "" || op.Status.Step != api.StepAddLearner {
					t.Fatalf("op = %+v", op)
				}
				if !strings.Contains(op.Metadata.Name, "join-ext") {
					t.Fatalf("op name %q", op.Metadata.Name)
				}
			},
		},
		{name: "external join waits for a node's learner", obs: world("VVVL").declare("ext"), action: Wait, check: reason("one learner at a time: n4")},
		{name: "external join waits while the cluster lacks quorum", obs: world("VUU").declare("ext"), action: Wait, check: reason("not healthy")},
		{
			name: "external join waits while a node is suspect", action: Wait, check: reason("n2 is suspect"),
			obs: world("VVV").declare("ext").with(func(o *Observed) {
				o.Liveness = map[string]Liveness{"n2": {State: LiveSuspect, Since: t0, Reason: "gossip"}}
			}),
		},
		{
			name: "a node's join request goes before an external member", action: StartJoin,
			obs: world("VVV").declare("ext").newcomer("n9", newPeer).join("n9", newPeer, t0),
			check: func(t *testing.T, s Step) {
				if s.Op.Spec.External || s.Request != "n9" {
					t.Fatalf("op = %+v", s.Op.Spec)
				}
			},
		},
		{
			name: "active external join adds the learner", action: AddLearner,
			obs: world("VVV").declare("ext").activeExt(api.OpJoin, api.StepAddLearner, 0, t0),
		},
		{
			name: "external learner that catches up is promoted", action: Promote, now: t0.Add(10 * time.Second),
			obs: world("VVV").declare("ext").extMember("L").activeExt(api.OpJoin, api.StepLearner, extID, t0),
			check: func(t *testing.T, s Step) {
				if s.Member != extID || s.LearnerURL != extClient || len(s.Voters) != 3 {
					t.Fatalf("step %+v", s)
				}
			},
		},
		{
			name: "unstarted external learner waits until it serves, before the start timeout", action: Wait, now: t0.Add(10 * time.Second),
			obs:   world("VVV").declare("ext").extMember("X").activeExt(api.OpJoin, api.StepLearner, extID, t0),
			check: reason("does not serve clients"),
		},
		{
			name: "external learner that never starts is removed after the start timeout", action: AbortJoin, now: t0.Add(time.Minute),
			obs:   world("VVV").declare("ext").extMember("X").activeExt(api.OpJoin, api.StepLearner, extID, t0),
			check: reason("did not start within 1m0s"),
		},
		{
			name: "external learner that stops catching up is removed after the progress timeout", action: AbortJoin, now: t0.Add(2 * time.Minute),
			obs: world("VVV").declare("ext").extMember("L").activeExt(api.OpJoin, api.StepLearner, extID, t0).with(func(o *Observed) {
				o.Active.Status.LearnerIndex = 100
				o.Active.Status.ProgressAt = t0.Add(time.Minute - time.Second)
			}),
			check: reason("no progress"),
		},
		{
			name: "promoted external member finishes its join", action: FinishJoin,
			obs: world("VVV").declare("ext").extMember("V").activeExt(api.OpJoin, api.StepLearner, extID, t0),
		},
		{
			name: "external learner that leaves the spec mid-join is removed", action: AbortJoin,
			obs: world("VVV").extMember("L").onboard("ext").activeExt(api.OpJoin, api.StepLearner, extID, t0),
			check: func(t *testing.T, s Step) {
				if s.Member != extID || !strings.Contains(s.Reason, "left the spec") {
					t.Fatalf("step %+v", s)
				}
			},
		},
		{
			name: "external voter not yet recorded is recorded", action: RecordExternal,
			obs: world("VVV").declare("ext").extMember("V"),
			check: func(t *testing.T, s Step) {
				if s.External != "ext" || s.PeerURL != extPeer {
					t.Fatalf("step %+v", s)
				}
			},
		},
		{name: "recorded external voter in spec is left alone", obs: world("VVV").declare("ext").extMember("V").onboard("ext"), action: None},
		{
			name: "external learner without an operation is taken up by a join", action: StartJoin,
			obs: world("VVV").declare("ext").extMember("L").onboard("ext"),
		},

		// Off-boarding.
		{
			name: "recorded external member out of spec is removed", action: StartRemove,
			obs: world("VVV").extMember("V").onboard("ext"),
			check: func(t *testing.T, s Step) {
				op := s.Op
				if op == nil || op.Spec.Type != api.OpRemove || !op.Spec.External || op.Spec.Node != "ext" || op.Spec.MemberID != extID || op.Status.Step != api.StepRemoveMember {
					t.Fatalf("op = %+v", op)
				}
			},
		},
		{
			name: "external member that leads gives leadership away first", action: TransferLeader,
			obs: world("VVV").extMember("*").onboard("ext").activeExt(api.OpRemove, api.StepRemoveMember, extID, t0),
			check: func(t *testing.T, s Step) {
				if s.Member != extID || s.To == 0 || s.To == extID || s.LeaderURL != extClient {
					t.Fatalf("step %+v", s)
				}
			},
		},
		{
			name: "external follower is removed", action: RemoveMember,
			obs: world("VVV").extMember("V").onboard("ext").activeExt(api.OpRemove, api.StepRemoveMember, extID, t0),
		},
		{
			name: "removed external member finishes", action: FinishRemove,
			obs: world("VVV").onboard("ext").activeExt(api.OpRemove, api.StepRemoveMember, extID, t0),
		},
		{
			name: "external removal waits while it would cost quorum", action: Wait,
			obs:   world("VU").extMember("V").onboard("ext"),
			check: reason("unsafe"),
		},
		{
			name: "external removal waits while a node is suspect", action: Wait, check: reason("suspect"),
			obs: world("VVV").extMember("V").onboard("ext").with(func(o *Observed) {
				o.Liveness = map[string]Liveness{"n3": {State: LiveSuspect, Since: t0, Reason: "gossip"}}
			}),
		},
		{name: "gone external member is forgotten", obs: world("VVV").onboard("ext"), action: ForgetExternal, check: reason("no longer a member")},
		{
			name: "external member whose spec moved to another peer URL is removed", action: StartRemove,
			obs: world("VVV").extMember("V").onboard("ext").with(func(o *Observed) {
				o.Cluster.Members = []api.EtcdMemberSpec{{Name: "ext", Kind: api.MemberExternal, PeerURLs: []string{"http://10.0.1.2:2380"}}}
			}),
		},

		// Never a node's member.
		{
			name: "an external member declared at a node's peer URL is not on-boarded", action: Wait, check: reason("declares a peer URL of node n2"),
			obs: world("VVV").with(func(o *Observed) {
				o.Cluster.Members = []api.EtcdMemberSpec{{Name: "ext", Kind: api.MemberExternal, PeerURLs: []string{"http://10.0.0.2:2380"}}}
			}),
		},
		{
			name: "a recorded external member whose peer URL a node took is forgotten, not removed", action: ForgetExternal, check: reason("node n2's"),
			obs: world("VVV").with(func(o *Observed) { o.Onboarded = map[string]string{"ext": "http://10.0.0.2:2380"} }),
		},

		// Never a ghost.
		{
			name: "healthy external voter counts for quorum", action: StartJoin,
			obs: world("VU").declare("ext").extMember("V").onboard("ext").newcomer("n9", newPeer).join("n9", newPeer, t0),
		},
		{
			name: "an unrecorded member out of spec is a ghost and left alone", action: None,
			obs: world("VVV").extMember("V"),
		},
		{
			name: "an external member cannot be removed by a node removal request", action: RefuseRemove,
			obs: world("VVV").declare("ext").extMember("V").onboard("ext").remove("ext", false, t0), check: reason(`no node or member named "ext"`),
		},
		{
			name: "an unhealthy external voter counts against quorum", action: Wait, check: reason("ext is unhealthy"),
			obs: world("VU").declare("ext").extMember("U").onboard("ext").newcomer("n9", newPeer).join("n9", newPeer, t0),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			s := Plan(tc.obs, pol, now)
			if s.Action != tc.action {
				t.Fatalf("action = %s (%s), want %s", s.Action, s.Reason, tc.action)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestExternalStarts(t *testing.T) {
	learning := world("VVV").declare("ext").extMember("X").activeExt(api.OpJoin, api.StepLearner, extID, t0)
	got := ExternalStarts(learning, nil)
	want := "ext=" + extPeer + ",n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.3:2380"
	if len(got) != 1 || got[0].Name != "ext" || got[0].InitialCluster != want || got[0].InitialClusterState != "existing" {
		t.Fatalf("starts = %+v, want ext with %s", got, want)
	}
	published := []api.ExternalMemberStart{ExternalStart("ext", "as etcd returned it")}
	if got := ExternalStarts(learning, published); len(got) != 1 || got[0] != published[0] {
		t.Fatalf("published values are kept: %+v", got)
	}
	for name, o := range map[string]Observed{
		"promoted":         world("VVV").declare("ext").extMember("V").activeExt(api.OpJoin, api.StepLearner, extID, t0),
		"gone":             world("VVV").declare("ext").activeExt(api.OpJoin, api.StepLearner, extID, t0),
		"not added yet":    world("VVV").declare("ext").activeExt(api.OpJoin, api.StepAddLearner, 0, t0),
		"no op":            world("VVV").declare("ext").extMember("V"),
		"a node's learner": world("VVVL").active(api.OpJoin, "n4", "http://10.0.0.4:2380", api.StepLearner, 4, t0),
	} {
		if got := ExternalStarts(o, published); got != nil {
			t.Errorf("%s: starts = %+v, want none", name, got)
		}
	}
}

// TestExternalMemberIsJudgedByEtcdHealthAlone: an external member has no
// heartbeat and no liveness entry; it is never taken as dead or suspect
// for that, nor replaced as a dead voter, however long it is down.
func TestExternalMemberIsJudgedByEtcdHealthAlone(t *testing.T) {
	pol := Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: time.Minute, ReplaceDeadMembersAfter: time.Minute}
	obs := world("VVV").declare("ext").extMember("U").onboard("ext").with(func(o *Observed) {
		o.Liveness = map[string]Liveness{"n1": {State: LiveAlive}, "n2": {State: LiveAlive}, "n3": {State: LiveAlive}}
	})
	if s := Plan(obs, pol, t0.Add(time.Hour)); s.Action != None {
		t.Fatalf("down external voter: %s, want None (nico does not run it, and does not replace it)", s)
	}
	// Back up: it counts as healthy, though it has no heartbeat.
	obs = world("VVU").declare("ext").extMember("V").onboard("ext").newcomer("n9", newPeer).join("n9", newPeer, t0)
	if s := Plan(obs, pol, t0); s.Action != StartJoin {
		t.Fatalf("healthy external voter without a heartbeat: %s, want StartJoin", s)
	}
}

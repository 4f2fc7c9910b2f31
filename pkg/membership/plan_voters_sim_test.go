package membership

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// sim applies the planner's steps to an Observed as the executor and etcd
// would, checking the safety invariants at every step: one operation at a
// time, one learner at a time, never below quorum, the leader never
// removed while it leads.
type sim struct {
	t     *testing.T
	obs   Observed
	now   time.Time
	ids   api.MemberID
	trace []string
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\ntrace:\n%v", fmt.Sprintf(format, args...), s.trace)
}

// run plans and applies steps until the plan is None (or a Wait).
func (s *sim) run() {
	s.t.Helper()
	for i := 0; i < 200; i++ {
		s.now = s.now.Add(time.Second)
		st := Plan(s.obs, DefaultPolicy, s.now)
		s.trace = append(s.trace, st.String())
		switch st.Action {
		case None:
			return
		case Wait:
			s.fail("unexpected wait: %v", st)
		}
		s.apply(st)
		if l := len(s.obs.learners()); l > 1 {
			s.fail("%d learners", l)
		}
		if p := Project(s.obs.Members, Change{}); !p.OK {
			s.fail("below quorum after %v: %s", st, p.Reason)
		}
	}
	s.fail("no end")
}

func (s *sim) join(node string) *api.JoinRequest {
	for _, j := range s.obs.Joins {
		if j.Spec.Node == node {
			return j
		}
	}
	return nil
}

// refile files node's join request anew, as its agent does once its
// member was shed to make it a standby.
func (s *sim) refile(node string) {
	if j := s.join(node); j != nil {
		j.Status = api.JoinRequestStatus{}
		return
	}
	n := s.obs.node(node)
	j := api.NewJoinRequest(node)
	j.Metadata.CreatedAt = s.now
	j.Spec = api.JoinRequestSpec{Node: node, PeerURL: n.Spec.PeerURL, ClientURL: n.Spec.ClientURL, Attempt: 2}
	s.obs.Joins = append(s.obs.Joins, j)
}

func (s *sim) apply(st Step) {
	s.t.Helper()
	o := &s.obs
	switch st.Action {
	case MarkStandby:
		s.join(st.Request).Status.Standby = true
	case StartJoin, StartRemove:
		if o.Active != nil {
			s.fail("%v while %s is active", st, o.Active.Metadata.Name)
		}
		o.Active = st.Op
		if st.Action == StartRemove {
			for _, r := range o.Removals {
				if r.Spec.Node == st.Request {
					r.Status.Phase = api.RemoveRunning
				}
			}
		}
	case AddLearner:
		s.ids++
		o.Members = append(o.Members, Member{ID: 100 + s.ids, Name: st.Request, Node: st.Request, Learner: true, Healthy: true,
			PeerURLs: []string{o.Active.Spec.PeerURL}, ClientURLs: []string{o.Active.Spec.ClientURL}, RaftIndex: 100})
		o.Active.Spec.MemberID = 100 + s.ids
		o.Active.Status.Step = api.StepLearner
		o.Active.Status.StepSince = s.now
	case Promote:
		if p := Project(o.Members, Change{Kind: PromoteChange, Member: st.Member}); !p.OK {
			s.fail("unsafe promote: %s", p.Reason)
		}
		o.memberByID(st.Member).Learner = false
	case FinishJoin:
		s.join(st.Request).Status.Phase = api.JoinJoined
		o.Active = nil
	case FileRemoval:
		if o.removalPending(st.Request) {
			s.fail("second removal of %s filed", st.Request)
		}
		r := api.NewRemoveRequest(st.Request)
		r.Spec.Node, r.Spec.Standby = st.Request, st.Standby
		r.Metadata.CreatedAt = s.now
		o.Removals = append(o.Removals, r)
	case TransferLeader:
		for i := range o.Members {
			o.Members[i].Leader = o.Members[i].ID == st.To
		}
	case RemoveMember:
		m := o.memberByID(st.Member)
		if m.Leader {
			s.fail("removing %s while it leads", m.label())
		}
		if p := Project(o.Members, Change{Kind: RemoveChange, Member: st.Member}); !p.OK {
			s.fail("unsafe removal of %s: %s", m.label(), p.Reason)
		}
		var keep []Member
		for _, x := range o.Members {
			if x.ID != st.Member {
				keep = append(keep, x)
			}
		}
		o.Members = keep
	case FinishRemove:
		for _, r := range o.Removals {
			if r.Spec.Node == st.Request {
				r.Status.Phase = api.RemoveDone
				if r.Spec.Standby {
					// Its agent starts again and files a new request.
					s.refile(st.Request)
				}
			}
		}
		o.Active = nil
	default:
		s.fail("no simulation of %v", st)
	}
}

// voterNodes lists the nodes of the voters.
func (s *sim) voterNodes() map[string]bool {
	out := map[string]bool{}
	for _, m := range s.obs.Members {
		if !m.Learner {
			out[m.Node] = true
		}
	}
	return out
}

func (s *sim) leaderNode() string {
	if l := s.obs.leader(); l != nil {
		return l.Node
	}
	return ""
}

// TestVoterCountChanges runs five control-plane hosts through voters 3,
// 5, 3 and 1 with the invariants checked at each step.
func TestVoterCountChanges(t *testing.T) {
	obs := world("VVV").voters(3).standby(4, t0, t0, false).standby(5, t0.Add(time.Second), t0, false).
		zones("n1=a", "n2=b", "n3=c", "n4=a", "n5=b")
	s := &sim{t: t, obs: obs, now: t0}
	s.run()
	if got := len(s.voterNodes()); got != 3 || !s.join("n4").Status.Standby || !s.join("n5").Status.Standby {
		t.Fatalf("voters %v, standbys n4=%v n5=%v: want 3 voters and two standbys", s.voterNodes(), s.join("n4").Status.Standby, s.join("n5").Status.Standby)
	}
	s.obs.Cluster.Voters = 5
	s.run()
	if got := s.voterNodes(); len(got) != 5 {
		t.Fatalf("voters %v after raising spec.voters to 5", got)
	}
	// Make the leader a node of the crowded domain: it still goes last.
	for i := range s.obs.Members {
		s.obs.Members[i].Leader = s.obs.Members[i].Node == "n4"
	}
	s.obs.Cluster.Voters = 3
	s.run()
	got := s.voterNodes()
	if len(got) != 3 || !got["n4"] {
		t.Fatalf("voters %v after lowering spec.voters to 3: want 3 with the leader n4 kept", got)
	}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if j := s.join(n); !got[n] && (j == nil || !j.Status.Standby || j.Status.Phase != api.JoinPending) {
			t.Fatalf("shed voter %s: join request %+v, want a standby again", n, j)
		}
	}
	s.obs.Cluster.Voters = 1
	s.run()
	got = s.voterNodes()
	if len(got) != 1 {
		t.Fatalf("voters %v after lowering spec.voters to 1", got)
	}
	t.Logf("trace:\n%v", s.trace)
}

package membership

import (
	"fmt"
	"sort"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Plan returns the next step towards the desired membership. It is pure.
func Plan(obs Observed, pol Policy, now time.Time) Step {
	obs = obs.withLiveness().withExternal()
	if s, ok := planNoSpace(obs); ok {
		return s
	}
	if obs.Active != nil {
		switch obs.Active.Spec.Type {
		case api.OpJoin:
			return planAnyJoinOp(obs, pol, now, obs.Active)
		case api.OpRemove:
			return planRemoveOp(obs, obs.Active)
		case api.OpRolloutStep:
			// The rollout loop owns it; membership changes wait (one change in flight).
			return Step{Action: Wait, Op: obs.Active, Reason: "rollout step " + obs.Active.Metadata.Name + " is in flight"}
		case api.OpDefrag:
			// The etcd-status controller owns it (coordinator/etcddefrag.go).
			return Step{Action: Wait, Op: obs.Active, Reason: "defragmentation " + obs.Active.Metadata.Name + " is in flight"}
		case api.OpSwitch:
			// A host switching its generation holds it (pkg/switchguard).
			return Step{Action: Wait, Op: obs.Active, Reason: "switch of " + obs.Active.Spec.Node + " (" + obs.Active.Metadata.Name + ") is in flight"}
		case api.OpRestore, api.OpRecover:
			// nicoctl restore or recover drives it (pkg/restore) and rejoins the members itself.
			return Step{Action: Wait, Op: obs.Active, Reason: string(obs.Active.Spec.Type) + " " + obs.Active.Metadata.Name + " is in flight"}
		default:
			return Step{Action: FailOp, Op: obs.Active, Reason: fmt.Sprintf("operation type %q is not known to this coordinator", obs.Active.Spec.Type)}
		}
	}
	if s, ok := planRemovals(obs, now); ok {
		return s
	}
	// A dead voter is replaced remove-then-add: its removal comes before
	// any join (the count then falls short and a standby is added). The
	// dead voter adds nothing to quorum, so removing it first keeps the
	// healthy voters and lowers (or keeps) the quorum: with n voters of
	// which h are healthy, tolerance h-(n/2+1) never drops, and the voter
	// count never exceeds spec.voters. Adding first would promote to n+1
	// voters with the dead one still counted, raising quorum to
	// (n+1)/2+1 while the newcomer has yet to prove itself, and with n odd
	// pass through an even cluster that tolerates no more failures than
	// the smaller one.
	dead, deadOK := planDeadReplacement(obs, pol, now)
	if deadOK && dead.Action == FileRemoval {
		return dead
	}
	if s, ok := planJoins(obs, now); ok {
		return s
	}
	if s, ok := planShrink(obs); ok {
		return s
	}
	if deadOK {
		return dead
	}
	if s, ok := planExternal(obs, now); ok {
		return s
	}
	return Step{Action: None}
}

func planJoinOp(obs Observed, pol Policy, now time.Time, op *api.Operation) Step {
	base := Step{Op: op, Request: op.Spec.Request, Member: op.Spec.MemberID}
	m := obs.memberByPeer(op.Spec.PeerURL)
	if m != nil {
		base.Member = m.ID
		if len(m.ClientURLs) > 0 {
			base.LearnerURL = m.ClientURLs[0]
		}
	}
	switch op.Status.Step {
	case api.StepAddLearner:
		if m != nil && !m.Learner {
			return with(base, FinishJoin, "member is already a voter")
		}
		if m != nil {
			return with(base, AdoptLearner, "learner was added before the journal recorded it")
		}
		if ls := obs.learners(); len(ls) > 0 {
			return with(base, Wait, fmt.Sprintf("one learner at a time: %s is a learner", ls[0].label()))
		}
		if p := Project(obs.Members, Change{}); !p.OK {
			return with(base, Wait, "cluster is not healthy: "+p.Reason)
		}
		if r := obs.suspectBlocker(op.Spec.Node, ""); r != "" {
			return with(base, Wait, r)
		}
		return with(base, AddLearner, "")
	case api.StepLearner:
		if m == nil {
			s := with(base, FailOp, "learner is no longer a member (removed outside nico)")
			s.Retry = true
			return s
		}
		if !m.Learner {
			return with(base, FinishJoin, "learner was promoted")
		}
		// A learner is promoted only once its member serves clients: its
		// status answered by the member itself within the health timeout
		// (Healthy). etcd accepts the promotion as soon as the learner's
		// log is in sync, before it has published itself or while its
		// publish retries, and such a voter counts against quorum. A
		// learner that got its log as a snapshot publishes itself only
		// after an entry past the snapshot is applied
		// (docs/etcd-snapshot-join.md): the nudge below is that entry.
		waited := now.Sub(op.Status.StepSince)
		if !m.Started() && waited >= pol.LearnerStartTimeout {
			s := with(base, AbortJoin, fmt.Sprintf("learner did not start within %s", pol.LearnerStartTimeout))
			s.Retry = true
			return s
		}
		// A learner is judged on its progress once it has answered (its
		// status now, or an index the journal recorded). Named is not
		// enough: a learner whose first publish etcd lost is named by the
		// cluster and answers nobody until its publish timeout (6 s) and
		// retry; until it answers, the start timeout bounds it.
		answered := m.Healthy || op.Status.LearnerIndex > 0
		if !answered && waited >= pol.LearnerStartTimeout {
			s := with(base, AbortJoin, fmt.Sprintf("learner did not answer within %s", pol.LearnerStartTimeout))
			s.Retry = true
			return s
		}
		// Not answering is not ready: its name may show already (its
		// first publish, lost to it, can arrive in its snapshot) while it
		// still refuses to publish itself.
		base.Nudge = !m.Healthy && waited >= NudgeAfter && Project(obs.Members, Change{}).OK
		last := op.Status.StepSince
		if op.Status.ProgressAt.After(last) {
			last = op.Status.ProgressAt
		}
		// The journal records the learner's progress only when the leader
		// tries to promote it. A learner past the journaled index has made
		// progress since, unrecorded because the promotion was held (a
		// suspect node, an unsafe projection): not stalled. The next
		// promotion attempt records its index, and the timeout runs again
		// from there.
		if stalled := now.Sub(last); answered && stalled >= pol.LearnerProgressTimeout && m.RaftIndex <= op.Status.LearnerIndex {
			s := with(base, AbortJoin, fmt.Sprintf("learner made no progress for %s (raft index %d)", stalled.Round(time.Second), op.Status.LearnerIndex))
			s.Retry = true
			return s
		}
		if !m.Healthy {
			return with(base, Wait, fmt.Sprintf("learner %s does not serve clients yet (its status is not answered); a voter that does not serve counts against quorum", m.label()))
		}
		if p := Project(obs.Members, Change{Kind: PromoteChange, Member: m.ID}); !p.OK {
			return with(base, Wait, "promotion unsafe: "+p.Reason)
		}
		if r := obs.suspectBlocker(op.Spec.Node, ""); r != "" {
			return with(base, Wait, r)
		}
		s := with(base, Promote, "")
		s.Voters = obs.healthyVoterURLs()
		if l := obs.leader(); l != nil && len(l.ClientURLs) > 0 {
			s.LeaderURL = l.ClientURLs[0]
		}
		return s
	default:
		return with(base, FailOp, fmt.Sprintf("join operation at unknown step %q", op.Status.Step))
	}
}

func planRemoveOp(obs Observed, op *api.Operation) Step {
	base := Step{Op: op, Request: op.Spec.Request, Member: op.Spec.MemberID}
	m := obs.memberByID(op.Spec.MemberID)
	if m == nil && op.Spec.MemberID == 0 {
		m = obs.memberOfNode(op.Spec.Node)
	}
	if m == nil {
		return with(base, FinishRemove, "member is gone")
	}
	base.Member = m.ID
	if reason := removeBlocker(obs, m, op.Spec.Force); reason != "" {
		return with(base, FailOp, reason)
	}
	if r := obs.suspectBlocker("", m.Node); r != "" && !op.Spec.Force {
		return with(base, Wait, r)
	}
	if m.Leader {
		to := Successor(obs.Members, m.ID)
		if to == nil {
			return with(base, FailOp, fmt.Sprintf("%s leads etcd and no healthy voter can take leadership", m.label()))
		}
		s := with(base, TransferLeader, fmt.Sprintf("%s leads etcd: moving leadership to %s first", m.label(), to.label()))
		s.To = to.ID
		if len(m.ClientURLs) > 0 {
			s.LeaderURL = m.ClientURLs[0]
		}
		return s
	}
	if obs.leader() == nil {
		return with(base, Wait, "etcd has no leader")
	}
	return with(base, RemoveMember, "")
}

// removeBlocker says why removing m is not allowed, or "".
func removeBlocker(obs Observed, m *Member, force bool) string {
	voters := 0
	for _, x := range obs.Members {
		if !x.Learner {
			voters++
		}
	}
	if !m.Learner && voters <= 1 {
		return fmt.Sprintf("%s is the last voting member; removing it would destroy the cluster", m.label())
	}
	if m.Learner || force {
		return ""
	}
	if p := Project(obs.Members, Change{Kind: RemoveChange, Member: m.ID}); !p.OK {
		return fmt.Sprintf("removing %s is unsafe: %s", m.label(), p.Reason)
	}
	return ""
}

// Successor picks the healthy, registered (or external) voter with the
// highest raft index (then the lowest name) to take leadership from id, or
// nil when none can.
func Successor(members []Member, id api.MemberID) *Member {
	var best *Member
	for i := range members {
		c := &members[i]
		if c.ID == id || c.Learner || !c.Healthy || (c.Node == "" && c.External == "") {
			continue
		}
		if best == nil || c.RaftIndex > best.RaftIndex || (c.RaftIndex == best.RaftIndex && c.label() < best.label()) {
			best = c
		}
	}
	return best
}

func planRemovals(obs Observed, now time.Time) (Step, bool) {
	reqs := pending(obs.Removals, func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemovePending })
	for _, r := range reqs {
		name := r.Spec.Node
		s := Step{Request: name}
		m := obs.memberOfNode(name)
		if obs.node(name) == nil && m == nil {
			return with(s, RefuseRemove, fmt.Sprintf("no node or member named %q", name)), true
		}
		if m != nil {
			s.Member = m.ID
			if reason := removeBlocker(obs, m, r.Spec.Force); reason != "" {
				return with(s, RefuseRemove, reason), true
			}
			if reason := obs.suspectBlocker("", m.Node); reason != "" && !r.Spec.Force {
				return with(s, Wait, reason), true
			}
		}
		op := newOp(now, api.OpRemove, name)
		op.Spec.Request = name
		op.Spec.Force = r.Spec.Force
		op.Spec.MemberID = s.Member
		if n := obs.node(name); n != nil {
			op.Spec.PeerURL = n.Spec.PeerURL
		}
		op.Status.Step = api.StepRemoveMember
		s.Op = op
		return with(s, StartRemove, ""), true
	}
	return Step{}, false
}

func planJoins(obs Observed, now time.Time) (Step, bool) {
	var reqs []*api.JoinRequest
	for _, j := range pending(obs.Joins, func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinPending }) {
		name := j.Spec.Node
		if obs.node(name) == nil || !obs.Alive[name] || obs.removalPending(name) || obs.live(name).State == LiveDead {
			continue
		}
		if m := obs.memberByPeer(j.Spec.PeerURL); m != nil && !m.Learner {
			return with(Step{Request: name, Member: m.ID}, FinishJoin, "member is already a voter"), true
		}
		reqs = append(reqs, j)
	}
	if len(reqs) == 0 {
		return Step{}, false
	}
	ls := obs.learners()
	voters, want := obs.voterCount(), obs.desiredVoters()
	if voters+len(ls) >= want {
		// Enough voters: the requests are standbys, but for the one whose
		// learner exists already (its journal entry was lost): it resumes.
		var resume *api.JoinRequest
		var standbys []*api.JoinRequest
		for _, j := range reqs {
			if len(ls) > 0 && hasPeer(ls[0], j.Spec.PeerURL) {
				resume = j
			} else {
				standbys = append(standbys, j)
			}
		}
		if resume == nil {
			return planStandbys(obs, standbys, voters, want)
		}
		reqs = []*api.JoinRequest{resume}
	} else {
		obs.rankStandbys(reqs)
	}
	var waiting *Step
	for _, j := range reqs {
		name := j.Spec.Node
		s := Step{Request: name}
		if len(ls) > 0 && !hasPeer(ls[0], j.Spec.PeerURL) {
			if waiting == nil {
				w := with(s, Wait, fmt.Sprintf("one learner at a time: %s is a learner", ls[0].label()))
				waiting = &w
			}
			continue
		}
		if p := Project(obs.Members, Change{}); !p.OK {
			if waiting == nil {
				w := with(s, Wait, "cluster is not healthy: "+p.Reason)
				waiting = &w
			}
			continue
		}
		if r := obs.suspectBlocker(name, ""); r != "" {
			if waiting == nil {
				w := with(s, Wait, r)
				waiting = &w
			}
			continue
		}
		op := newOp(now, api.OpJoin, name)
		op.Spec.Request = name
		op.Spec.PeerURL = j.Spec.PeerURL
		op.Spec.ClientURL = j.Spec.ClientURL
		op.Status.Step = api.StepAddLearner
		s.Op = op
		return with(s, StartJoin, ""), true
	}
	if waiting != nil {
		return *waiting, true
	}
	return Step{}, false
}

func hasPeer(m Member, peer string) bool {
	for _, u := range m.PeerURLs {
		if u == peer {
			return true
		}
	}
	return false
}

// pending returns the requests that keep, oldest first.
func pending[T api.Object](all []T, keep func(T) bool) []T {
	var out []T
	for _, r := range all {
		if keep(r) {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GetMetadata(), out[j].GetMetadata()
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.Name < b.Name
	})
	return out
}

// OpID names an operation so that names sort by start time.
func OpID(now time.Time, t api.OpType, node string) string {
	return fmt.Sprintf("%s-%s-%s", now.UTC().Format("20060102T150405.000000"), map[api.OpType]string{api.OpJoin: "join", api.OpRemove: "remove"}[t], node)
}

func newOp(now time.Time, t api.OpType, node string) *api.Operation {
	op := api.NewOperation(OpID(now, t, node))
	op.Metadata.CreatedAt = now
	op.Spec.Type = t
	op.Spec.Node = node
	op.Status.Phase = api.OpRunning
	op.Status.StepSince = now
	op.Status.UpdatedAt = now
	return op
}

func with(s Step, a Action, reason string) Step {
	s.Action = a
	s.Reason = reason
	return s
}

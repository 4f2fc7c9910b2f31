package switchguard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
)

var t0 = time.Unix(1_000_000, 0).UTC()

// members builds cp-1.. from a pattern: V healthy voter, L leader (healthy
// voter), S sick voter, l learner.
func members(pattern string) []membership.Member {
	var ms []membership.Member
	for i, c := range pattern {
		m := membership.Member{ID: api.MemberID(i + 1), Node: fmt.Sprintf("cp-%d", i+1), Name: fmt.Sprintf("cp-%d", i+1),
			ClientURLs: []string{fmt.Sprintf("https://10.0.0.%d:2379", i+1)}, Healthy: true, RaftIndex: uint64(100 + i)}
		switch c {
		case 'L':
			m.Leader = true
		case 'S':
			m.Healthy = false
		case 'l':
			m.Learner = true
		}
		ms = append(ms, m)
	}
	return ms
}

func ask(node, attempt string, at time.Time) *api.SwitchRequest {
	r := api.NewSwitchRequest(node)
	r.Spec = api.SwitchRequestSpec{Attempt: attempt, Toplevel: "/nix/store/new-" + node, Action: "switch", RequestedAt: at}
	return r
}

func answered(r *api.SwitchRequest, p api.SwitchPhase, msg string) *api.SwitchRequest {
	r.Status = api.SwitchRequestStatus{Attempt: r.Spec.Attempt, Phase: p, Message: msg}
	return r
}

func op(typ api.OpType, node, request string, step api.OpStep, since time.Time) *api.Operation {
	o := api.NewOperation(string(typ) + "-" + node)
	if typ == api.OpSwitch {
		o = api.NewOperation(OpName(node, request))
	}
	o.Spec = api.OperationSpec{Type: typ, Node: node, Request: request}
	o.Status = api.OperationStatus{Phase: api.OpRunning, Step: step, StepSince: since}
	return o
}

func switched(r *api.SwitchRequest, at time.Time) *api.SwitchRequest {
	r.Spec.SwitchedAt = at
	return r
}

// TestPlan holds every answer the planner gives, each refusal reason among
// them.
func TestPlan(t *testing.T) {
	held := op(api.OpSwitch, "cp-1", "a1", api.StepSwitching, t0)
	for _, tc := range []struct {
		name   string
		obs    Observed
		now    time.Time
		want   string // Step.String() prefix
		reason string // in Step.Reason
	}{
		{name: "nothing asked", obs: Observed{Members: members("LVV")}, want: "None"},
		{name: "a follower of three is granted at once",
			obs:  Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Take cp-2 Granted", reason: "quorum holds"},
		{name: "the leader is granted only after leadership moved",
			obs:  Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			want: "Take cp-1 Waiting", reason: "moving leadership away"},
		{name: "the oldest ask takes the slot first",
			obs:  Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{ask("cp-3", "a1", t0.Add(time.Second)), ask("cp-2", "a1", t0)}},
			want: "Take cp-2 Granted"},
		{name: "a host without a member is granted without the slot, even while it is held",
			obs:  Observed{Members: members("LVV"), Active: held, Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0), ask("dp-1", "a1", t0)}},
			want: "Answer dp-1 Granted", reason: "runs no etcd member"},
		{name: "waits: another switch holds the slot",
			obs:  Observed{Members: members("LVV"), Active: held, Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0), ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "the switch of cp-1 (operation switch-cp-1-a1)"},
		{name: "waits: a join holds the slot",
			obs:  Observed{Members: members("LVVl"), Active: op(api.OpJoin, "cp-4", "cp-4", api.StepLearner, t0), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "the join of cp-4"},
		{name: "waits: a defragmentation holds the slot",
			obs:  Observed{Members: members("LVV"), Active: op(api.OpDefrag, "cp-3", "", api.StepDefragment, t0), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "the defragmentation of cp-3"},
		{name: "waits: another host's rollout step holds the slot",
			obs:  Observed{Members: members("LVV"), Active: op(api.OpRolloutStep, "cp-3", "r1", "", t0), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "the rollout step on cp-3"},
		{name: "granted under nico's own rollout step of this host",
			obs:  Observed{Members: members("LVV"), Active: op(api.OpRolloutStep, "cp-2", "r1", "", t0), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Granted", reason: "nico's rollout step"},
		{name: "refused: two voters lose quorum with one down",
			obs:  Observed{Members: members("LV"), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Refused", reason: "below quorum 2"},
		{name: "waits: another voter is sick",
			obs:  Observed{Members: members("LVS"), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "cp-3 is unhealthy"},
		{name: "the sick voter itself may switch: quorum holds without it",
			obs:  Observed{Members: members("LVS"), Requests: []*api.SwitchRequest{ask("cp-3", "a1", t0)}},
			want: "Take cp-3 Granted"},
		{name: "waits: no leader",
			obs:  Observed{Members: members("VVV"), Requests: []*api.SwitchRequest{ask("cp-2", "a1", t0)}},
			want: "Answer cp-2 Waiting", reason: "no leader"},
		{name: "waits: the leader cannot hand leadership to anyone",
			obs: Observed{Members: append(members("L"), membership.Member{ID: 7, Healthy: true}, membership.Member{ID: 8, Node: "cp-8", Healthy: true}),
				Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			want: "Answer cp-1 Waiting", reason: "has no registered node"},
		{name: "the only voter switches in place",
			obs:  Observed{Members: members("L"), Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			want: "Take cp-1 Granted", reason: "only voter"},
		{name: "refused: a hold out of bounds",
			obs: Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{func() *api.SwitchRequest {
				r := ask("cp-2", "a1", t0)
				r.Spec.Hold = api.Duration(time.Second)
				return r
			}()}},
			want: "Answer cp-2 Refused", reason: "spec.hold is 1s; accepted: 30s to 2h0m0s"},
		{name: "an unchanged waiting answer is not written again",
			obs: Observed{Members: members("LVV"), Active: op(api.OpDefrag, "cp-3", "", api.StepDefragment, t0),
				Requests: []*api.SwitchRequest{answered(ask("cp-2", "a1", t0), api.SwitchWaiting, "the slot is held by the defragmentation of cp-3 (operation Defrag-cp-3); the switch waits until it ends")}},
			want: "None"},
		{name: "a granted ask is not answered again",
			obs:  Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{answered(ask("cp-2", "a1", t0), api.SwitchGranted, "")}},
			want: "None"},
		{name: "a new attempt is answered afresh",
			obs: Observed{Members: members("LVV"), Requests: []*api.SwitchRequest{func() *api.SwitchRequest {
				r := answered(ask("cp-2", "a1", t0), api.SwitchRefused, "x")
				r.Spec.Attempt = "a2"
				return r
			}()}},
			want: "Take cp-2 Granted"},
		// The held switch.
		{name: "held: waits for the host to switch",
			obs:  Observed{Members: members("LVV"), Active: held, Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			now:  t0.Add(time.Minute),
			want: "Wait cp-1"},
		{name: "held: released once switched and healthy",
			obs:  Observed{Members: members("VLV"), Active: held, Requests: []*api.SwitchRequest{switched(ask("cp-1", "a1", t0), t0)}},
			want: "Release cp-1 Released", reason: "member is healthy"},
		{name: "held: switched but its member not yet healthy",
			obs:  Observed{Members: members("SLV"), Active: held, Requests: []*api.SwitchRequest{switched(ask("cp-1", "a1", t0), t0)}},
			want: "Wait cp-1", reason: "waiting for its member"},
		{name: "held: taken back at the deadline",
			obs:  Observed{Members: members("SLV"), Active: held, Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			now:  t0.Add(api.DefaultSwitchHold),
			want: "Release cp-1 Expired", reason: "within its hold (10m0s)"},
		{name: "held: released when the request is withdrawn",
			obs:  Observed{Members: members("LVV"), Active: held},
			want: "Release cp-1", reason: "withdrawn"},
		{name: "held: released when the host asks again",
			obs:  Observed{Members: members("LVV"), Active: held, Requests: []*api.SwitchRequest{ask("cp-1", "a2", t0)}},
			want: "Release cp-1", reason: "asked again"},
		{name: "held at transfer: leadership moves to the most advanced healthy voter",
			obs:  Observed{Members: members("LVV"), Active: op(api.OpSwitch, "cp-1", "a1", api.StepTransferLeader, t0), Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			want: "TransferLeader cp-1", reason: "to cp-3"},
		{name: "held at transfer: granted once it moved",
			obs:  Observed{Members: members("VLV"), Active: op(api.OpSwitch, "cp-1", "a1", api.StepTransferLeader, t0), Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			want: "Grant cp-1 Granted"},
		{name: "held at transfer: given back when leadership never moves",
			obs:  Observed{Members: members("LSS"), Active: op(api.OpSwitch, "cp-1", "a1", api.StepTransferLeader, t0), Requests: []*api.SwitchRequest{ask("cp-1", "a1", t0)}},
			now:  t0.Add(api.DefaultSwitchHold),
			want: "Release cp-1 Expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			s := Plan(tc.obs, now)
			if !strings.HasPrefix(s.String(), tc.want) || !strings.Contains(s.Reason, tc.reason) {
				t.Fatalf("Plan = %q\nwant prefix %q, reason containing %q", s, tc.want, tc.reason)
			}
		})
	}
}

// TestPlanNeverTakesTheSlotWhenQuorumWouldBeLost: for every cluster of up
// to five voters (each healthy or not, any leader) and every asking host,
// a Take happens only when the voters left healthy with the host's member
// down still make quorum, or the host is the only voter.
func TestPlanNeverTakesTheSlotWhenQuorumWouldBeLost(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for mask := 0; mask < 1<<n; mask++ {
			for lead := -1; lead < n; lead++ {
				var ms []membership.Member
				for i := 0; i < n; i++ {
					ms = append(ms, membership.Member{ID: api.MemberID(i + 1), Node: fmt.Sprintf("cp-%d", i+1), Healthy: mask&(1<<i) != 0, Leader: i == lead})
				}
				for asker := 0; asker < n; asker++ {
					node := fmt.Sprintf("cp-%d", asker+1)
					s := Plan(Observed{Members: ms, Requests: []*api.SwitchRequest{ask(node, "a", t0)}}, t0)
					if s.Action != Take {
						continue
					}
					healthy := 0
					for i, m := range ms {
						if i != asker && m.Healthy {
							healthy++
						}
					}
					if n > 1 && healthy < n/2+1 {
						t.Fatalf("%d voters, healthy mask %b, leader %d: %s took the slot leaving %d healthy voters of %d: %s", n, mask, lead, node, healthy, n, s)
					}
				}
			}
		}
	}
}

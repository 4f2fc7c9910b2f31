package membership

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// cluster builds members from a compact spec: one letter per member.
//
//	V healthy voter   U unhealthy voter   G healthy ghost voter (no node)
//	L healthy learner X unstarted learner
//	N named learner that does not answer yet (started, not serving clients)
//
// The first V is the leader. Member i has ID i+1 and node "n<i+1>".
func cluster(spec string) []Member {
	var ms []Member
	leader := false
	for i, c := range spec {
		m := Member{ID: api.MemberID(i + 1), Name: fmt.Sprintf("n%d", i+1), Node: fmt.Sprintf("n%d", i+1), Healthy: true,
			PeerURLs: []string{fmt.Sprintf("http://10.0.0.%d:2380", i+1)}, ClientURLs: []string{fmt.Sprintf("http://10.0.0.%d:2379", i+1)}, RaftIndex: 100}
		switch c {
		case 'U':
			m.Healthy = false
		case 'G':
			m.Node = ""
		case 'L':
			m.Learner = true
		case 'X':
			m.Learner, m.Healthy, m.Name, m.ClientURLs = true, false, "", nil
		case 'N':
			m.Learner, m.Healthy = true, false
		}
		if c == 'V' && !leader {
			m.Leader, leader = true, true
		}
		ms = append(ms, m)
	}
	return ms
}

func TestProject(t *testing.T) {
	tests := []struct {
		spec    string
		change  Change
		voters  int
		healthy int
		ok      bool
		reason  string
	}{
		// No change: is the cluster healthy now?
		{"V", Change{}, 1, 1, true, ""},
		{"U", Change{}, 1, 0, false, "n1 is unhealthy"},
		{"VV", Change{}, 2, 2, true, ""},
		{"VU", Change{}, 2, 1, false, "below quorum 2"},
		{"VVU", Change{}, 3, 2, true, ""},
		{"VUU", Change{}, 3, 1, false, "1 healthy voter(s) of 3"},
		{"VVG", Change{}, 3, 2, true, ""},
		{"VGG", Change{}, 3, 1, false, "has no registered node"},
		{"VVL", Change{}, 2, 2, true, ""},
		{"VUL", Change{}, 2, 1, false, "below quorum 2"},
		{"VVVUU", Change{}, 5, 3, true, ""},
		{"VVUUU", Change{}, 5, 2, false, "below quorum 3"},
		{"VVVGU", Change{}, 5, 3, true, ""},

		// Removals.
		{"V", Change{RemoveChange, 1}, 0, 0, false, "no voting member"},
		{"VV", Change{RemoveChange, 2}, 1, 1, true, ""},
		{"VU", Change{RemoveChange, 2}, 1, 1, true, ""},
		{"VU", Change{RemoveChange, 1}, 1, 0, false, "n2 is unhealthy"},
		{"VVV", Change{RemoveChange, 3}, 2, 2, true, ""},
		{"VVU", Change{RemoveChange, 2}, 2, 1, false, "below quorum 2"},
		{"VVU", Change{RemoveChange, 3}, 2, 2, true, ""},
		{"VVG", Change{RemoveChange, 1}, 2, 1, false, "has no registered node"},
		{"VVG", Change{RemoveChange, 3}, 2, 2, true, ""},
		{"VVVV", Change{RemoveChange, 4}, 3, 3, true, ""},
		{"VVUU", Change{RemoveChange, 1}, 3, 1, false, "below quorum 2"},
		{"VVVUU", Change{RemoveChange, 4}, 4, 3, true, ""},
		{"VVVUU", Change{RemoveChange, 1}, 4, 2, false, "below quorum 3"},
		{"VVVVV", Change{RemoveChange, 1}, 4, 4, true, ""},
		{"VVVGG", Change{RemoveChange, 2}, 4, 2, false, "below quorum 3"},
		{"VVL", Change{RemoveChange, 2}, 1, 1, true, ""}, // learner is no voter
		{"VUL", Change{RemoveChange, 1}, 1, 0, false, "n2 is unhealthy"},

		// Promotions.
		{"VL", Change{PromoteChange, 2}, 2, 2, true, ""},
		// A learner that does not serve would be a voter that counts
		// against quorum: etcd's in-sync check does not make it serve.
		{"VX", Change{PromoteChange, 2}, 2, 1, false, "n2 does not serve clients"},
		{"VN", Change{PromoteChange, 2}, 2, 1, false, "n2 does not serve clients"},
		{"VUN", Change{PromoteChange, 3}, 3, 1, false, "below quorum 2"},
		{"VVVN", Change{PromoteChange, 4}, 4, 3, true, ""},
		{"VN", Change{}, 1, 1, true, ""},
		{"VUL", Change{PromoteChange, 3}, 3, 2, true, ""},
		{"VUUL", Change{PromoteChange, 4}, 4, 2, false, "below quorum 3"},
		{"VVVVL", Change{PromoteChange, 5}, 5, 5, true, ""},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%v", tt.spec, tt.change)
		t.Run(name, func(t *testing.T) {
			p := Project(cluster(tt.spec), tt.change)
			if p.Voters != tt.voters || p.Healthy != tt.healthy || p.OK != tt.ok {
				t.Fatalf("got voters=%d healthy=%d ok=%v, want %d %d %v (%s)", p.Voters, p.Healthy, p.OK, tt.voters, tt.healthy, tt.ok, p.Reason)
			}
			if p.Quorum != tt.voters/2+1 {
				t.Fatalf("quorum = %d for %d voters", p.Quorum, tt.voters)
			}
			if !strings.Contains(p.Reason, tt.reason) || (tt.ok && p.Reason != "") {
				t.Fatalf("reason = %q, want it to contain %q", p.Reason, tt.reason)
			}
		})
	}
}

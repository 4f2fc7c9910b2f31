package membership

import (
	"fmt"
	"sort"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Change is a membership change whose outcome is projected.
type Change struct {
	Kind   ChangeKind
	Member api.MemberID
}

// ChangeKind says what a Change does.
type ChangeKind int

// Kinds of change.
const (
	NoChange ChangeKind = iota
	RemoveChange
	PromoteChange
)

// Projection is the quorum outcome of a change.
type Projection struct {
	Voters  int // voters after the change
	Healthy int // healthy voters with a registered node, after the change
	Quorum  int // voters needed after the change
	OK      bool
	Reason  string
}

// Project computes the voters, healthy voters and quorum after change.
// Unhealthy voters and voters with no registered node (ghosts) count as
// voters but never as healthy (an external member is no ghost: it counts
// as healthy when its status answered); learners are not voters. A learner being
// promoted counts as healthy only when it serves clients (its status
// answered): etcd promotes a learner whose log is in sync whether or not it
// has published itself, and a voter that does not serve counts against
// quorum.
func Project(members []Member, change Change) Projection {
	var p Projection
	var weak []string
	for _, m := range members {
		voter := !m.Learner
		switch {
		case change.Kind == RemoveChange && m.ID == change.Member:
			continue
		case change.Kind == PromoteChange && m.ID == change.Member:
			voter = true
		}
		if !voter {
			continue
		}
		p.Voters++
		promoted := change.Kind == PromoteChange && m.ID == change.Member
		switch {
		case m.Node == "" && m.External == "":
			weak = append(weak, fmt.Sprintf("%s has no registered node", m.label()))
		case promoted && !m.Healthy:
			weak = append(weak, fmt.Sprintf("%s does not serve clients", m.label()))
		case !m.Healthy:
			weak = append(weak, fmt.Sprintf("%s is unhealthy", m.label()))
		default:
			p.Healthy++
		}
	}
	p.Quorum = p.Voters/2 + 1
	p.OK = p.Voters > 0 && p.Healthy >= p.Quorum
	switch {
	case p.Voters == 0:
		p.Reason = "it would leave no voting member"
	case !p.OK:
		sort.Strings(weak)
		p.Reason = fmt.Sprintf("it would leave %d healthy voter(s) of %d, below quorum %d", p.Healthy, p.Voters, p.Quorum)
		if len(weak) > 0 {
			p.Reason += " (" + strings.Join(weak, "; ") + ")"
		}
	}
	return p
}

package events

import (
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of join and removal requests.
const (
	JoinRequested    = "JoinRequested"
	RemovalRequested = "RemovalRequested"
	Refused          = "Refused"
	IdentityRevoked  = "IdentityRevoked"
)

// deriveJoin: a new request (or a new attempt), and the leader's answers
// that no operation journals (an answer naming its operation is told by
// the operation's own history).
func deriveJoin(c Change) ([]Event, error) {
	prev, cur, err := decode[api.JoinRequest](c)
	if err != nil || cur == nil {
		return nil, err
	}
	name := store.Name(c.Key)
	node := firstString(cur.Spec.Node, name)
	var out []Event
	if prev == nil || prev.Spec.Attempt != cur.Spec.Attempt {
		out = append(out, c.event(firstSet(cur.Metadata.CreatedAt, cur.Status.UpdatedAt), api.KindJoinRequest, name, Normal, JoinRequested,
			fmt.Sprintf("%s asks to join the etcd cluster (attempt %d, peer URL %s)", node, cur.Spec.Attempt, orDash(cur.Spec.PeerURL)), "", node))
	}
	changed := prev == nil || prev.Status.Phase != cur.Status.Phase || prev.Status.Message != cur.Status.Message
	if !changed || cur.Status.Operation != "" || cur.Status.Phase == api.JoinPending {
		return out, nil
	}
	switch cur.Status.Phase {
	case api.JoinLearnerAdded:
		out = append(out, c.event(cur.Status.UpdatedAt, api.KindJoinRequest, name, Normal, LearnerAdded,
			fmt.Sprintf("learner %s added for %s", cur.Status.MemberID, node), "", node))
	case api.JoinJoined:
		out = append(out, c.event(cur.Status.UpdatedAt, api.KindJoinRequest, name, Normal, Joined,
			fmt.Sprintf("%s joined: %s", node, orDash(cur.Status.Message)), "", node))
	case api.JoinFailed:
		out = append(out, c.event(cur.Status.UpdatedAt, api.KindJoinRequest, name, Warning, JoinFailed,
			fmt.Sprintf("join of %s failed: %s", node, orDash(cur.Status.Message)), "", node))
	}
	return out, nil
}

// deriveRemoval: the request, a refusal with its reason, the revocation of
// the removed node's identity, and outcomes no operation journals.
func deriveRemoval(c Change) ([]Event, error) {
	prev, cur, err := decode[api.RemoveRequest](c)
	if err != nil || cur == nil {
		return nil, err
	}
	name := store.Name(c.Key)
	node := firstString(cur.Spec.Node, name)
	var out []Event
	if prev == nil {
		by, force := "", ""
		if cur.Spec.RequestedBy != "" {
			by = " by " + cur.Spec.RequestedBy
		}
		if cur.Spec.Force {
			force = " (forced: no quorum check)"
		}
		out = append(out, c.event(firstSet(cur.Metadata.CreatedAt, cur.Status.UpdatedAt), api.KindRemoveRequest, name, Normal, RemovalRequested,
			fmt.Sprintf("removal of %s requested%s%s", node, by, force), "", node))
	}
	changed := prev == nil || prev.Status.Phase != cur.Status.Phase || prev.Status.Message != cur.Status.Message
	if changed {
		switch {
		case cur.Status.Phase == api.RemoveRefused:
			out = append(out, c.event(cur.Status.UpdatedAt, api.KindRemoveRequest, name, Warning, Refused,
				fmt.Sprintf("removal of %s refused: %s", node, orDash(cur.Status.Message)), cur.Status.Operation, node))
		case cur.Status.Operation != "":
		case cur.Status.Phase == api.RemoveDone:
			out = append(out, c.event(cur.Status.UpdatedAt, api.KindRemoveRequest, name, Normal, Removed,
				fmt.Sprintf("%s removed: %s", node, orDash(cur.Status.Message)), "", node))
		case cur.Status.Phase == api.RemoveFailed:
			out = append(out, c.event(cur.Status.UpdatedAt, api.KindRemoveRequest, name, Warning, RemovalFailed,
				fmt.Sprintf("removal of %s failed: %s", node, orDash(cur.Status.Message)), "", node))
		}
	}
	if !cur.Status.IdentityRevokedAt.IsZero() && (prev == nil || prev.Status.IdentityRevokedAt.IsZero()) {
		out = append(out, c.event(cur.Status.IdentityRevokedAt, api.KindRemoveRequest, name, Normal, IdentityRevoked,
			fmt.Sprintf("etcd user and role of %s deleted: its certificate reaches nothing now", node), cur.Status.Operation, node))
	}
	return out, nil
}

// firstString returns the first non-empty string.
func firstString(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

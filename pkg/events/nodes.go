package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of nodes and their liveness.
const (
	Registered   = "Registered"
	Deregistered = "Deregistered"
	// NodePhase events are "Node" + the new phase: NodeJoining,
	// NodeMember, NodeLeaving, NodeRemoved, NodeFailed, NodeRegistered.
	NodePhasePrefix = "Node"
	NodeAlive       = "NodeAlive"
	NodeSuspect     = "NodeSuspect"
	NodeDead        = "NodeDead"
	// GossipKeyRotated: the mesh moved to a new key generation.
	GossipKeyRotated = "GossipKeyRotated"
	// DataDirFull: the agent reports its etcd data dir's file system full
	// (api.DataDirFullBelow free); DataDirSpaceReturned: no longer.
	DataDirFull          = "DataDirFull"
	DataDirSpaceReturned = "DataDirSpaceReturned"
)

// deriveNode: a node's registration and, while watched, its phase
// changes (a node records no time of its phase, so the backlog has only
// the registration). A deletion is timed when it is seen.
func deriveNode(c Change) ([]Event, error) {
	prev, cur, err := decode[api.Node](c)
	if err != nil {
		return nil, err
	}
	name := store.Name(c.Key)
	if cur == nil {
		if prev == nil {
			return nil, nil
		}
		return []Event{c.event(c.At, api.KindNode, name, Normal, Deregistered, name+"'s registration was deleted", "", name)}, nil
	}
	var out []Event
	if prev == nil {
		roles := make([]string, len(cur.Spec.Roles))
		for i, r := range cur.Spec.Roles {
			roles[i] = string(r)
		}
		out = append(out, c.event(firstSet(cur.Metadata.CreatedAt, cur.Status.UpdatedAt), api.KindNode, name, Normal, Registered,
			fmt.Sprintf("%s registered, roles %s", name, orDash(strings.Join(roles, ","))), "", name))
		return out, nil
	}
	if prev.Status.Phase != cur.Status.Phase {
		typ := Normal
		if cur.Status.Phase == api.NodeFailed {
			typ = Warning
		}
		msg := fmt.Sprintf("%s: %s -> %s", name, orDash(string(prev.Status.Phase)), cur.Status.Phase)
		if cur.Status.Message != "" {
			msg += ": " + cur.Status.Message
		}
		out = append(out, c.event(cur.Status.UpdatedAt, api.KindNode, name, typ, NodePhasePrefix+string(cur.Status.Phase), msg, "", name))
	}
	wasFull := prev.Status.DataDir != nil && prev.Status.DataDir.Full
	if d := cur.Status.DataDir; d != nil && d.Full != wasFull {
		if d.Full {
			out = append(out, c.event(d.MeasuredAt, api.KindNode, name, Warning, DataDirFull,
				fmt.Sprintf("%s's etcd data dir is full: %d bytes free of %d; its member cannot write and stops until space returns", name, d.FreeBytes, d.SizeBytes), "", name))
		} else {
			out = append(out, c.event(d.MeasuredAt, api.KindNode, name, Normal, DataDirSpaceReturned,
				fmt.Sprintf("%s's etcd data dir has space again: %d bytes free of %d", name, d.FreeBytes, d.SizeBytes), "", name))
		}
	}
	return out, nil
}

// deriveLiveness: each node whose liveness state (or the time it entered
// it) differs from before; read whole, every node's current state since it
// entered it.
func deriveLiveness(c Change) ([]Event, error) {
	prev, cur, err := decode[api.Liveness](c)
	if err != nil || cur == nil {
		return nil, err
	}
	names := make([]string, 0, len(cur.Status.Nodes))
	for n := range cur.Status.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Event
	for _, n := range names {
		l := cur.Status.Nodes[n]
		if prev != nil {
			if p, ok := prev.Status.Nodes[n]; ok && p.State == l.State && p.Since.Equal(l.Since) {
				continue
			}
		}
		typ, reason := Warning, ""
		switch l.State {
		case "alive":
			typ, reason = Normal, NodeAlive
		case "suspect":
			reason = NodeSuspect
		case "dead":
			reason = NodeDead
		default:
			reason = NodePhasePrefix + strings.ToUpper(l.State[:min(1, len(l.State))]) + l.State[min(1, len(l.State)):]
		}
		msg := fmt.Sprintf("%s is %s", n, l.State)
		if l.Reason != "" {
			msg += ": " + l.Reason
		}
		if cur.Status.Leader != "" {
			msg += " (seen by " + cur.Status.Leader + ")"
		}
		out = append(out, c.event(firstSet(l.Since, cur.Status.UpdatedAt), api.KindLiveness, cur.Metadata.Name, typ, reason, msg, "", n))
	}
	return out, nil
}

// deriveGossipKey: a new generation of the mesh's keys (nicoctl gossip
// rotate-key).
func deriveGossipKey(c Change) ([]Event, error) {
	prev, cur, err := decode[api.GossipKey](c)
	if err != nil || cur == nil || (prev != nil && prev.Spec.Generation == cur.Spec.Generation) || cur.Spec.Generation == 0 {
		return nil, err
	}
	msg := fmt.Sprintf("gossip key generation %d", cur.Spec.Generation)
	if cur.Spec.RotatedBy != "" {
		msg += " (by " + cur.Spec.RotatedBy + ")"
	}
	if cur.Spec.SecretGeneration == cur.Spec.Generation && cur.Spec.SecretGeneration != 0 {
		msg += ", from a new secret"
	}
	return []Event{c.event(firstSet(cur.Spec.RotatedAt, cur.Metadata.CreatedAt), api.KindGossipKey, cur.Metadata.Name, Normal, GossipKeyRotated, msg, "")}, nil
}

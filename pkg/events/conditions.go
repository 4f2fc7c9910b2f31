package events

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Reasons of machines and the etcd cluster. A condition's event is named
// after its type when it holds (Scheduled, Ready...) and "Not" + its type
// when it does not (NotReady, NotBooted...).
const (
	MachineCreated = "MachineCreated"
	MachineDeleted = "MachineDeleted"
	// MachinePhase events are "Machine" + the new phase (MachineRunning...).
	MachinePhasePrefix = "Machine"
	AlarmRaised        = "AlarmRaised"
	AlarmCleared       = "AlarmCleared"
	// NoSpaceReclaimed: etcd raised NOSPACE and nico reclaimed the space
	// and disarmed it (status.noSpace, written once it is over).
	NoSpaceReclaimed = "NoSpaceReclaimed"
)

// badWhenTrue are the condition types that are a warning when they hold.
var badWhenTrue = []string{api.CondVersionSkew}

// neutral are the condition types that are never a warning.
var neutral = []string{api.CondScaleDown}

// conditionEvents returns an event for each condition of cur that is new
// or changed from prev; updatedAt times a change that kept its Since (a
// new reason or message under the same status).
func conditionEvents(c Change, kind, name string, prev, cur []api.Condition, updatedAt time.Time, nodes ...string) []Event {
	var out []Event
	for _, k := range cur {
		old := api.FindCondition(prev, k.Type)
		if old != nil && old.Status == k.Status && old.Reason == k.Reason && old.Message == k.Message {
			continue
		}
		at := k.Since
		if (old != nil && old.Status == k.Status) || at.IsZero() {
			at = updatedAt
		}
		typ, reason := Normal, k.Type
		if !k.Status {
			reason = "Not" + k.Type
		}
		if k.Status == slices.Contains(badWhenTrue, k.Type) && !slices.Contains(neutral, k.Type) {
			typ = Warning
		}
		msg := fmt.Sprintf("%s %s=%t", name, k.Type, k.Status)
		if k.Reason != "" {
			msg += " (" + k.Reason + ")"
		}
		if k.Message != "" {
			msg += ": " + k.Message
		}
		out = append(out, c.event(at, kind, name, typ, reason, msg, "", nodes...))
	}
	return out
}

// deriveMachine: a machine's creation, its phase changes while watched,
// its conditions and its deletion.
func deriveMachine(c Change) ([]Event, error) {
	prev, cur, err := decode[api.Machine](c)
	if err != nil {
		return nil, err
	}
	name := store.Name(c.Key)
	if cur == nil {
		if prev == nil {
			return nil, nil
		}
		return []Event{c.event(c.At, api.KindMachine, name, Normal, MachineDeleted, "machine "+name+" deleted", "", name)}, nil
	}
	var out []Event
	st := cur.Status
	if prev == nil {
		out = append(out, c.event(firstSet(cur.Metadata.CreatedAt, st.UpdatedAt), api.KindMachine, name, Normal, MachineCreated,
			fmt.Sprintf("machine %s (%s) created, pool %s", name, cur.Spec.Kind, orDash(cur.Spec.Pool)), "", name))
	} else if prev.Status.Phase != st.Phase && st.Phase != "" {
		typ := Normal
		if st.Phase == api.MachineFailed {
			typ = Warning
		}
		msg := fmt.Sprintf("machine %s: %s -> %s", name, orDash(string(prev.Status.Phase)), st.Phase)
		if cur.Spec.Host != "" {
			msg += " on " + cur.Spec.Host
		}
		out = append(out, c.event(st.UpdatedAt, api.KindMachine, name, typ, MachinePhasePrefix+string(st.Phase), msg, "", name))
	}
	var old []api.Condition
	if prev != nil {
		old = prev.Status.Conditions
	}
	return append(out, conditionEvents(c, api.KindMachine, name, old, st.Conditions, st.UpdatedAt, name)...), nil
}

// derivePool: a pool's conditions.
func derivePool(c Change) ([]Event, error) {
	prev, cur, err := decode[api.MachinePool](c)
	if err != nil || cur == nil {
		return nil, err
	}
	var old []api.Condition
	if prev != nil {
		old = prev.Status.Conditions
	}
	name := store.Name(c.Key)
	return conditionEvents(c, api.KindMachinePool, name, old, cur.Status.Conditions, cur.Status.UpdatedAt), nil
}

// deriveEtcdCluster: the cluster's conditions, and alarms raised and
// cleared.
func deriveEtcdCluster(c Change) ([]Event, error) {
	prev, cur, err := decode[api.EtcdCluster](c)
	if err != nil || cur == nil {
		return nil, err
	}
	name := cur.Metadata.Name
	var oldConds []api.Condition
	var oldAlarms []string
	if prev != nil {
		oldConds, oldAlarms = prev.Status.Conditions, prev.Status.Alarms
	}
	st := cur.Status
	out := conditionEvents(c, api.KindEtcdCluster, name, oldConds, st.Conditions, st.UpdatedAt)
	for _, a := range st.Alarms {
		if !slices.Contains(oldAlarms, a) {
			out = append(out, c.event(st.UpdatedAt, api.KindEtcdCluster, name, Warning, AlarmRaised, "etcd alarm "+a, ""))
		}
	}
	for _, a := range oldAlarms {
		if !slices.Contains(st.Alarms, a) {
			out = append(out, c.event(st.UpdatedAt, api.KindEtcdCluster, name, Normal, AlarmCleared, "etcd alarm "+a+" cleared", ""))
		}
	}
	if ep := st.NoSpace; ep != nil && !ep.DisarmedAt.IsZero() && (prev == nil || prev.Status.NoSpace == nil || !prev.Status.NoSpace.SeenAt.Equal(ep.SeenAt)) {
		msg := fmt.Sprintf("etcd refused writes: NOSPACE on %s from %s (database %d bytes, quota %d); compacted at revision %d, defragmented, disarmed at %s (database %d bytes)",
			strings.Join(ep.Members, ","), ep.SeenAt.UTC().Format(time.RFC3339), ep.DBSize, ep.DBSizeQuota, ep.CompactedAt, ep.DisarmedAt.UTC().Format(time.RFC3339), ep.DBSizeAfter)
		out = append(out, c.event(ep.DisarmedAt, api.KindEtcdCluster, name, Warning, NoSpaceReclaimed, msg, "", ep.Members...))
	}
	return out, nil
}

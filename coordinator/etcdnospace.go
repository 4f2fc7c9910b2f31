package coordinator

import (
	"context"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/metrics"
)

// Under NOSPACE etcd refuses every write but deletions and compaction.
// The etcd-status controller then, on each pass:
//
//	alarm seen     log it (once), record the episode in memory, export
//	               nico_etcd_alarm; the status cannot be written
//	compact        the history at the current revision (physical), when
//	               the revision moved since the last compaction
//	defragment     the alarmed members, then every other voter that
//	               answers, once (a learner's snapshot is the leader's
//	               file), one at a time, followers first, the leader
//	               last (defrag.Plan), without the slot
//	disarm         each alarmed member once defragmented and below its
//	               quota, every voter defragmented (defrag.Disarm);
//	               never while above it
//	all disarmed   the episode goes into status.noSpace, the first status
//	               write that can land
//
// Membership changes and rollout steps wait meanwhile (membership.Plan,
// rollout observe): none could be journaled, and a member's restart
// under NOSPACE would serve refusals.

// noSpaceAlarms are the members with a NOSPACE alarm.
func noSpaceAlarms(alarms []etcdadmin.Alarm) map[api.MemberID]bool {
	out := map[api.MemberID]bool{}
	for _, a := range alarms {
		if a.Type == etcdadmin.AlarmNoSpace {
			out[a.Member] = true
		}
	}
	return out
}

// memberLabel is a member's node name, else its etcd name, else its ID.
func memberLabel(obs *etcdObservation, m etcdadmin.MemberStatus) string {
	for _, n := range obs.store.Nodes {
		if n.Spec.PeerURL != "" && slices.Contains(m.PeerURLs, n.Spec.PeerURL) {
			return n.Metadata.Name
		}
	}
	if m.Name != "" {
		return m.Name
	}
	return m.ID.String()
}

// reclaim compacts the history while NOSPACE is raised, and keeps the
// episode: when it was first seen, on which members, how large. changed
// reports a compaction.
func (s *etcdStatuser) reclaim(ctx context.Context, obs *etcdObservation) (bool, error) {
	alarmed := noSpaceAlarms(obs.alarms)
	if len(alarmed) == 0 {
		return false, nil
	}
	if s.episode == nil || !s.episode.DisarmedAt.IsZero() {
		s.episode = &api.NoSpaceEpisode{SeenAt: s.now()}
		defer func(ep *api.NoSpaceEpisode) {
			s.log.Error("etcd raised NOSPACE: the database passed its quota and every write is refused; compacting and defragmenting to reclaim space (spec.policy.quotaBackendBytes)",
				"members", ep.Members, "dbSize", ep.DBSize, "quota", ep.DBSizeQuota)
		}(s.episode)
	}
	// Kept current while it lasts: a member may raise it later, or answer
	// its status only on a later pass.
	ep := s.episode
	for _, m := range obs.members {
		if !alarmed[m.ID] {
			continue
		}
		if l := memberLabel(obs, m); !slices.Contains(ep.Members, l) {
			ep.Members = append(ep.Members, l)
			slices.Sort(ep.Members)
		}
		if m.Reachable && m.DBSize > ep.DBSize {
			ep.DBSize, ep.DBSizeQuota = m.DBSize, m.DBSizeQuota
		}
	}
	rev, err := s.admin.CompactHistory(ctx)
	if err != nil {
		return false, err
	}
	if rev == s.episode.CompactedAt {
		return false, nil
	}
	s.episode.CompactedAt = rev
	s.log.Info("compacted etcd's history under NOSPACE", "revision", rev)
	return true, nil
}

// disarmed records the end of the episode once no NOSPACE alarm is left.
func (s *etcdStatuser) disarmed(obs *etcdObservation) {
	if s.episode == nil || !s.episode.DisarmedAt.IsZero() || len(noSpaceAlarms(obs.alarms)) > 0 {
		return
	}
	s.episode.DisarmedAt = s.now()
	for _, m := range obs.members {
		if slices.Contains(s.episode.Members, memberLabel(obs, m)) {
			s.episode.DBSizeAfter = max(s.episode.DBSizeAfter, m.DBSize)
		}
	}
	s.log.Info("NOSPACE disarmed: writes are accepted again", "members", s.episode.Members,
		"dbSizeBefore", s.episode.DBSize, "dbSizeAfter", s.episode.DBSizeAfter, "since", s.episode.SeenAt)
}

// exportSpace sets the space metrics from one pass's observation.
func (s *etcdStatuser) exportSpace(obs *etcdObservation) {
	if s.space == nil {
		return
	}
	byID := map[api.MemberID]string{}
	var members []metrics.MemberSpace
	for _, ms := range obs.members {
		l := memberLabel(obs, ms)
		byID[ms.ID] = l
		if ms.Reachable {
			members = append(members, metrics.MemberSpace{Member: l, DBSize: ms.DBSize, DBSizeQuota: ms.DBSizeQuota})
		}
	}
	var alarms []metrics.SpaceAlarm
	for _, a := range obs.alarms {
		l, ok := byID[a.Member]
		if !ok {
			l = a.Member.String()
		}
		alarms = append(alarms, metrics.SpaceAlarm{Member: l, Type: a.Type})
	}
	var dirs []metrics.DataDir
	for _, n := range obs.store.Nodes {
		if d := n.Status.DataDir; d != nil && n.Status.Phase != api.NodeRemoved {
			dirs = append(dirs, metrics.DataDir{Node: n.Metadata.Name, Free: d.FreeBytes, Size: d.SizeBytes, Full: d.Full})
		}
	}
	s.space.Observe(alarms, members, dirs)
}

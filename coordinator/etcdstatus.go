package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/homystack/nico/coordinator/internal/etcdstatus"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
)

// The etcd-status controller keeps EtcdCluster.status current and runs
// the maintenance nico owns (defragmentation, NOSPACE disarm;
// coordinator/etcddefrag.go). Each pass re-reads etcd's member statuses and
// alarms and the store's nodes, heartbeats, active operation and
// EtcdCluster, builds the status with etcdstatus.Build and writes it only
// when it changed, fenced and compare-and-swapped on the object's revision:
// a spec applied meanwhile is re-read and kept, never overwritten.

// maintenanceAdmin is what the etcd-status controller observes and
// maintains etcd through: pkg/etcdadmin's Admin; tests wrap it to see the
// calls.
type maintenanceAdmin interface {
	// Statuses lists the members with the Status each answered.
	Statuses(ctx context.Context) ([]etcdadmin.MemberStatus, error)
	// Alarms lists etcd's active alarms.
	Alarms(ctx context.Context) ([]etcdadmin.Alarm, error)
	// Defragment defragments the member at url within timeout.
	Defragment(ctx context.Context, url string, timeout time.Duration) error
	// DisarmNoSpace disarms member id's NOSPACE alarm.
	DisarmNoSpace(ctx context.Context, id api.MemberID) error
	// CompactHistory compacts the history at the current revision and
	// returns it.
	CompactHistory(ctx context.Context) (int64, error)
}

var _ maintenanceAdmin = (*etcdadmin.Admin)(nil)

// statusRefresh is how old a written status may grow while nothing but
// raft indexes and in-use sizes moved (they move with every write, this
// controller's own included, so they alone never cause a write).
const statusRefresh = 30 * time.Second

// learnerWindow bounds the catch-up samples kept per learner.
const learnerWindow = 30 * time.Second

// etcdStatuser is the etcd-status controller of one term.
type etcdStatuser struct {
	name  string
	st    *store.Store
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	admin maintenanceAdmin
	// space is nil when the candidate records no metrics.
	space *metrics.EtcdSpace
	// obs is told of each defragmentation (Config.Observer).
	obs Observer
	// slots: a defragmentation waiting for the one-change slot says so.
	slots *slotWants
	// samples are each learner's (time, raft index) observations.
	samples etcdstatus.History[api.MemberID]
	// defragged are members defragmented since a NOSPACE alarm was seen
	// (alarmed or not, defrag.Plan): only those
	// are disarmed, and the set is cleared once no alarm is left.
	defragged map[api.MemberID]bool
	// episode is the last NOSPACE episode (coordinator/etcdnospace.go).
	episode *api.NoSpaceEpisode
	// spec is the spec the last written status answered, with its revision.
	spec    string
	specRev int64
}

// newEtcdStatuser returns the etcd-status controller of the term of d,
// maintaining etcd through admin.
func newEtcdStatuser(d leaderDeps, admin maintenanceAdmin) *etcdStatuser {
	s := &etcdStatuser{name: d.name, st: d.st, fence: d.fence, now: d.now, log: d.log, admin: admin, obs: d.obs, slots: d.slots,
		samples: etcdstatus.History[api.MemberID]{Window: learnerWindow, Max: 20}, defragged: map[api.MemberID]bool{}}
	if d.metrics != nil {
		s.space = d.metrics.Space
	}
	return s
}

// etcdObservation is one pass's input.
type etcdObservation struct {
	members []etcdadmin.MemberStatus
	alarms  []etcdadmin.Alarm
	store   *observation
}

func (s *etcdStatuser) observe(ctx context.Context) (*etcdObservation, error) {
	ms, err := s.admin.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	alarms, err := s.admin.Alarms(ctx)
	if err != nil {
		return nil, err
	}
	o, err := readInputs(ctx, s.st)
	if err != nil {
		return nil, err
	}
	return &etcdObservation{members: ms, alarms: alarms, store: o}, nil
}

// reconcile is the etcd-status controller's Reconcile (controllers.go).
func (s *etcdStatuser) reconcile(ctx context.Context) error {
	obs, err := s.observe(ctx)
	if err != nil {
		return fmt.Errorf("etcd status: %w", err)
	}
	s.exportSpace(obs)
	if obs.store.cluster == nil {
		return nil // the membership controller writes the bootstrap one
	}
	compacted, err := s.reclaim(ctx, obs)
	if err != nil {
		return fmt.Errorf("etcd maintenance: %w", err)
	}
	changed, err := s.maintain(ctx, obs)
	if err != nil {
		return fmt.Errorf("etcd maintenance: %w", err)
	}
	if changed || compacted {
		if obs, err = s.observe(ctx); err != nil {
			return fmt.Errorf("etcd status: %w", err)
		}
		s.exportSpace(obs)
	}
	s.disarmed(obs)
	err = s.writeStatus(ctx, obs)
	if etcdadmin.NoSpace(err) {
		// Under NOSPACE no status can be written: the metrics and the
		// log tell, and the episode is written once it is over.
		s.log.Debug("etcd status not written: NOSPACE")
		return nil
	}
	if err != nil {
		return fmt.Errorf("etcd status: %w", err)
	}
	return nil
}

// progress samples each learner beside the leader and estimates its
// catch-up; learners that left are forgotten.
func (s *etcdStatuser) progress(ms []etcdadmin.MemberStatus, now time.Time) map[api.MemberID]etcdstatus.Progress {
	var leader *etcdadmin.MemberStatus
	id := etcdstatus.LeaderOf(ms)
	for i := range ms {
		if ms[i].Reachable && ms[i].ID == id {
			leader = &ms[i]
		}
	}
	learners := map[api.MemberID]bool{}
	out := map[api.MemberID]etcdstatus.Progress{}
	for _, m := range ms {
		if !m.Learner {
			continue
		}
		learners[m.ID] = true
		if leader == nil || !m.Reachable {
			continue
		}
		ss := s.samples.Add(m.ID, etcdstatus.Sample{At: now, Learner: m.RaftIndex, Leader: leader.RaftIndex})
		if p, ok := etcdstatus.Estimate(ss); ok {
			out[m.ID] = p
		}
	}
	s.samples.Retain(func(id api.MemberID) bool { return learners[id] })
	return out
}

// writeStatus builds the status and writes it when it changed, retrying on
// a concurrent write of the object (a spec applied meanwhile): each try
// re-reads the object and builds from its spec, and keeps its External.
func (s *etcdStatuser) writeStatus(ctx context.Context, obs *etcdObservation) error {
	now := s.now()
	prog := s.progress(obs.members, now)
	active := ""
	if obs.store.Active != nil {
		active = obs.store.Active.Metadata.Name
	}
	ec := obs.store.cluster
	for attempt := 0; ; attempt++ {
		next := etcdstatus.Build(etcdstatus.Input{
			Spec: ec.Spec, Members: obs.members, Alarms: obs.alarms, Nodes: obs.store.Nodes, Alive: obs.store.Alive,
			Active: active, Progress: prog, Prev: ec.Status, Now: now,
		})
		next.External = ec.Status.External
		next.Snapshots = ec.Status.Snapshots // the snapshot controller's (snapshots.go)
		// The compaction controller's (etcdcompact.go), kept as read.
		next.Compaction = ec.Status.Compaction
		next.NoSpace = ec.Status.NoSpace
		if s.episode != nil && !s.episode.DisarmedAt.IsZero() {
			next.NoSpace = s.episode
		}
		next.ObservedRevision = s.observedRevision(ec)
		next.UpdatedAt = now
		if !statusChanged(ec.Status, next, now) {
			return nil
		}
		out := *ec
		out.Status = next
		err := s.put(ctx, &out)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 4 {
			return err
		}
		fresh := &api.EtcdCluster{}
		if err := s.st.Get(ctx, store.EtcdClusterKey, fresh); err != nil {
			return err
		}
		ec = fresh
	}
}

// observedRevision is the revision of the spec the status answers: kept
// while the spec is the one last answered, else the object's revision.
func (s *etcdStatuser) observedRevision(ec *api.EtcdCluster) int64 {
	b, _ := json.Marshal(ec.Spec)
	if string(b) == s.spec && s.specRev != 0 {
		return s.specRev
	}
	if ec.Status.ObservedRevision != 0 && s.spec == "" {
		// A new term: trust what the last leader wrote until the spec moves.
		s.spec, s.specRev = string(b), ec.Status.ObservedRevision
		return s.specRev
	}
	s.spec, s.specRev = string(b), ec.Metadata.Revision
	return s.specRev
}

// put writes ec fenced, only while the object is at the revision it was
// read at.
func (s *etcdStatuser) put(ctx context.Context, ec *api.EtcdCluster) error {
	_, err := s.st.PutUnchanged(ctx, s.fence, ec)
	return err
}

// statusChanged reports whether next differs from prev in more than its
// time stamp and the counters that move with every write (raft and
// applied index, in-use size, a database size moving by less than
// sizesMoved's step; a learner's progress to the percent and its
// ETA to the second), or prev is older than statusRefresh.
func statusChanged(prev, next api.EtcdClusterStatus, now time.Time) bool {
	if now.Sub(prev.UpdatedAt) >= statusRefresh {
		return true
	}
	a, b := significant(prev), significant(next)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) != string(jb) || sizesMoved(prev, next)
}

// sizesMoved reports a member whose database size moved by sizeStep and
// a tenth at least (a database grows by pages with every few writes; a
// defragmentation worth the name shrinks it by far more).
func sizesMoved(prev, next api.EtcdClusterStatus) bool {
	before := map[string]int64{}
	for _, m := range prev.Members {
		before[m.Name] = m.DBSize
	}
	for _, m := range next.Members {
		b := before[m.Name]
		d := m.DBSize - b
		if d < 0 {
			d = -d
		}
		if d >= max(sizeStep, b/10) {
			return true
		}
	}
	return false
}

// sizeStep is a database size change always worth a status write.
const sizeStep = 1 << 20

func significant(st api.EtcdClusterStatus) api.EtcdClusterStatus {
	st.UpdatedAt = time.Time{}
	ms := make([]api.EtcdMemberStatus, len(st.Members))
	for i, m := range st.Members {
		m.RaftIndex, m.AppliedIndex, m.DBSize, m.DBSizeInUse = 0, 0, 0, 0
		m.Progress = math.Round(m.Progress*100) / 100
		m.ETA = api.Duration(time.Duration(m.ETA).Round(time.Second))
		ms[i] = m
	}
	st.Members = ms
	return st
}

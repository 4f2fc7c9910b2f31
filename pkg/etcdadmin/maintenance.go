package etcdadmin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Alarm types as etcd names them.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// MemberStatus is one member as listed, with the full Status it answered
// (Reachable false: it did not answer within the health timeout, Err says
// why).
type MemberStatus struct {
	ID         api.MemberID
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
	Reachable  bool
	Err        string
	// From etcd's Status response.
	Version      string
	DBSize       int64
	DBSizeInUse  int64
	DBSizeQuota  int64
	Leader       api.MemberID
	RaftTerm     uint64
	RaftIndex    uint64
	AppliedIndex uint64
	Errors       []string
}

// Alarm is one of etcd's active alarms.
type Alarm struct {
	Member api.MemberID
	Type   string
}

// Statuses lists the members and asks each for its Status, in parallel,
// each call bounded by the health timeout. It fails only when the member
// list cannot be read.
func (a *Admin) Statuses(ctx context.Context) ([]MemberStatus, error) {
	lctx, cancel := context.WithTimeout(ctx, a.callTimeout())
	defer cancel()
	resp, err := a.cli.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: member list: %w", err)
	}
	out := make([]MemberStatus, len(resp.Members))
	var wg sync.WaitGroup
	for i, m := range resp.Members {
		out[i] = MemberStatus{ID: api.MemberID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
		if len(m.ClientURLs) == 0 {
			out[i].Err = "not started"
			continue
		}
		wg.Add(1)
		go func(s *MemberStatus, url string) {
			defer wg.Done()
			st, err := a.status(ctx, url)
			if err != nil {
				s.Err = err.Error()
				return
			}
			s.Reachable = true
			s.Version, s.DBSize, s.DBSizeInUse, s.DBSizeQuota = st.Version, st.DbSize, st.DbSizeInUse, st.DbSizeQuota
			s.Leader, s.RaftTerm, s.RaftIndex, s.AppliedIndex = api.MemberID(st.Leader), st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex
			s.Errors = st.Errors
		}(&out[i], m.ClientURLs[0])
	}
	wg.Wait()
	return out, nil
}

// Alarms lists etcd's active alarms.
func (a *Admin) Alarms(ctx context.Context) ([]Alarm, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*a.callTimeout())
	defer cancel()
	resp, err := a.cli.AlarmList(cctx)
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: alarm list: %w", err)
	}
	var out []Alarm
	for _, m := range resp.Alarms {
		if m.Alarm == etcdserverpb.AlarmType_NONE {
			continue
		}
		out = append(out, Alarm{Member: api.MemberID(m.MemberID), Type: m.Alarm.String()})
	}
	return out, nil
}

// DisarmNoSpace disarms the NOSPACE alarm of member id. CORRUPT is never
// disarmed by nico: there is no call for it here.
func (a *Admin) DisarmNoSpace(ctx context.Context, id api.MemberID) error {
	cctx, cancel := context.WithTimeout(ctx, 2*a.callTimeout())
	defer cancel()
	_, err := a.cli.AlarmDisarm(cctx, &clientv3.AlarmMember{MemberID: uint64(id), Alarm: etcdserverpb.AlarmType_NOSPACE})
	if err != nil {
		return fmt.Errorf("etcdadmin: disarm NOSPACE of %s: %w", id, err)
	}
	return nil
}

// Defragment defragments the member at url over its own client. The call
// blocks the member while it rewrites its database, so it is bounded by
// timeout rather than the health timeout.
func (a *Admin) Defragment(ctx context.Context, url string, timeout time.Duration) error {
	cli, err := a.members.get(url)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cli.Defragment(cctx, url); err != nil {
		return fmt.Errorf("etcdadmin: defragment %s: %w", url, err)
	}
	return nil
}

// NoSpace reports etcd's "database space exceeded": the cluster raised
// NOSPACE and refuses writes until it is disarmed.
func NoSpace(err error) bool { return err != nil && isEtcdError(err, rpctypes.ErrNoSpace) }

// callTimeout bounds the maintenance calls to the cluster: the health
// timeout the Admin was made with (its dial timeout). Per-member Status
// calls go through status, with the current health timeout.
func (a *Admin) callTimeout() time.Duration { return a.dialTimeout }

// CompactHistory compacts the history of the whole key space at the
// current revision and returns that revision; physical, so the call
// returns once the members dropped the old revisions. It frees what only
// old revisions hold, which a defragmentation then gives back to the file
// system: etcd's answer to NOSPACE. Watchers of older revisions see their
// watch compacted. A revision already compacted is no error.
func (a *Admin) CompactHistory(ctx context.Context) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*a.callTimeout())
	defer cancel()
	rev, err := store.CurrentRevision(cctx, a.cli, "\x00")
	if err != nil {
		return 0, fmt.Errorf("etcdadmin: %w", err)
	}
	cctx2, cancel2 := context.WithTimeout(ctx, compactTimeout)
	defer cancel2()
	if _, err := a.cli.Compact(cctx2, rev, clientv3.WithCompactPhysical()); err != nil && !isEtcdError(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("etcdadmin: compact at revision %d: %w", rev, err)
	}
	return rev, nil
}

// compactTimeout bounds a physical compaction.
const compactTimeout = time.Minute

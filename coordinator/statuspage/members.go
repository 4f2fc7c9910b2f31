package statuspage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// statusTimeout bounds the status call to one member when the page asks
// etcd itself (no EtcdCluster status row for it).
const statusTimeout = time.Second

// MemberRow is one etcd member, or a standby or external member the
// EtcdCluster status names.
type MemberRow struct {
	Name string
	ID   api.MemberID
	// Role comes from etcd's member list (voter, learner); standby and
	// external only from EtcdCluster status.
	Role    string
	Started bool
	// Health is "healthy", "unhealthy" or "" when unknown.
	Health    string
	Leader    bool
	RaftIndex uint64
	// Progress is a learner's raft index over the leader's (0..1), -1 when
	// unknown; ETA the time left the leader estimated ("" when unknown).
	Progress float64
	ETA      string
	Version  string
	Message  string
	// Source says where health and index come from: "status" (the
	// leader's EtcdCluster status) or "etcd" (asked by this page).
	Source string
}

// ProgressPercent is Progress as a whole percentage.
func (m MemberRow) ProgressPercent() int { return int(m.Progress*100 + 0.5) }

// readMembers lists etcd's members; health, index and progress come from
// the EtcdCluster status when it has the member, else from asking the
// member.
func readMembers(ctx context.Context, st *store.Store, ec *api.EtcdCluster) ([]MemberRow, error) {
	cli := st.Client()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	byID := map[api.MemberID]api.EtcdMemberStatus{}
	byName := map[string]api.EtcdMemberStatus{}
	if ec != nil {
		for _, s := range ec.Status.Members {
			if s.ID != 0 {
				byID[s.ID] = s
			}
			byName[s.Name] = s
		}
	}
	rows := make([]MemberRow, len(resp.Members))
	var ask []int
	seen := map[string]bool{}
	for i, m := range resp.Members {
		row := MemberRow{Name: m.Name, ID: api.MemberID(m.ID), Role: api.RoleVoter, Started: m.Name != "", Progress: -1}
		if m.IsLearner {
			row.Role = api.RoleLearner
		}
		s, ok := byID[row.ID]
		if !ok && m.Name != "" {
			s, ok = byName[m.Name]
		}
		if ok {
			seen[s.Name] = true
			row.fromStatus(s)
		} else if len(m.ClientURLs) > 0 {
			ask = append(ask, i)
		}
		if !row.Started {
			row.Message = "not started"
		}
		rows[i] = row
	}
	askMembers(ctx, cli, resp.Members, rows, ask)
	slices.SortStableFunc(rows, func(a, b MemberRow) int {
		if (a.Name == "") != (b.Name == "") {
			return cmp.Compare(b.Name, a.Name) // unnamed (not started) last
		}
		return cmp.Compare(a.Name, b.Name)
	})
	if ec != nil {
		for _, s := range ec.Status.Members {
			if !seen[s.Name] && (s.Role == api.RoleStandby || s.Role == api.RoleExternal) {
				row := MemberRow{Name: s.Name, ID: s.ID, Role: s.Role, Progress: -1}
				row.fromStatus(s)
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

// fromStatus takes health, index and progress from the leader's status row.
func (m *MemberRow) fromStatus(s api.EtcdMemberStatus) {
	m.Source = "status"
	m.Health = health(s.Healthy)
	m.Leader, m.RaftIndex, m.Version, m.Message = s.Leader, s.RaftIndex, s.Version, s.Message
	if m.Role == api.RoleLearner {
		m.Progress = s.Progress
		if s.ETA > 0 {
			m.ETA = time.Duration(s.ETA).Round(time.Second).String()
		}
	}
}

// askMembers fills health and index of rows[ask] by calling each member's
// status, in parallel, and a learner's progress against the leader's index.
func askMembers(ctx context.Context, cli *clientv3.Client, members []*etcdserverpb.Member, rows []MemberRow, ask []int) {
	if len(ask) == 0 {
		return
	}
	type answer struct {
		i      int
		resp   *clientv3.StatusResponse
		errMsg string
	}
	answers := make([]answer, len(ask))
	var wg sync.WaitGroup
	for k, i := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			resp, err := cli.Status(cctx, members[i].ClientURLs[0])
			answers[k] = answer{i: i, resp: resp}
			if err != nil {
				answers[k].errMsg = err.Error()
			}
		}()
	}
	wg.Wait()
	var leaderIndex uint64
	for _, a := range answers {
		if a.resp != nil && a.resp.Leader == a.resp.Header.MemberId {
			leaderIndex = a.resp.RaftIndex
		}
	}
	for _, r := range rows {
		if r.Leader {
			leaderIndex = max(leaderIndex, r.RaftIndex)
		}
	}
	for _, a := range answers {
		r := &rows[a.i]
		r.Source = "etcd"
		if a.resp == nil {
			r.Health, r.Message = health(false), a.errMsg
			continue
		}
		r.Health = health(len(a.resp.Errors) == 0)
		r.RaftIndex, r.Version = a.resp.RaftIndex, a.resp.Version
		r.Leader = a.resp.Leader == a.resp.Header.MemberId
		if r.Role == api.RoleLearner && leaderIndex > 0 {
			r.Progress = min(1, float64(a.resp.RaftIndex)/float64(leaderIndex))
		}
	}
}

func health(ok bool) string {
	if ok {
		return "healthy"
	}
	return "unhealthy"
}

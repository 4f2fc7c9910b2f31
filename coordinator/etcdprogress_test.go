package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// scriptedAdmin answers Statuses with what the test set last.
type scriptedAdmin struct {
	mu sync.Mutex
	ms []etcdadmin.MemberStatus
}

func (a *scriptedAdmin) set(ms ...etcdadmin.MemberStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ms = ms
}

func (a *scriptedAdmin) Statuses(context.Context) ([]etcdadmin.MemberStatus, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]etcdadmin.MemberStatus(nil), a.ms...), nil
}

func (a *scriptedAdmin) Alarms(context.Context) ([]etcdadmin.Alarm, error) { return nil, nil }

func (a *scriptedAdmin) Defragment(context.Context, string, time.Duration) error { return nil }

func (a *scriptedAdmin) DisarmNoSpace(context.Context, api.MemberID) error { return nil }

func (a *scriptedAdmin) CompactHistory(context.Context) (int64, error) { return 0, nil }

// TestLearnerProgressInStatus: passes an injected clock apart, the
// controller samples the learner beside the leader and writes its progress
// and the ETA from the rate the gap closed; once it is a voter the
// progress is gone.
func TestLearnerProgressInStatus(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st := dialStore(t, cl)
	ctx := t.Context()
	if err := st.Put(ctx, store.EtcdClusterKey, api.NewEtcdCluster()); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, fence := leaderTerm(t, st, "a", withClock(clockAt(&now)))
	fake := &scriptedAdmin{}
	s := newEtcdStatuser(c.leaderDeps(fence), fake)
	leader := func(idx uint64) etcdadmin.MemberStatus {
		return etcdadmin.MemberStatus{ID: 1, Name: "cp-1", ClientURLs: []string{"http://cp-1"}, Reachable: true, Leader: 1, RaftIndex: idx, Version: "3.6.16"}
	}
	learner := func(idx uint64, isLearner bool) etcdadmin.MemberStatus {
		return etcdadmin.MemberStatus{ID: 2, Name: "cp-2", ClientURLs: []string{"http://cp-2"}, Learner: isLearner, Reachable: true, Leader: 1, RaftIndex: idx, Version: "3.6.16"}
	}
	read := func() api.EtcdMemberStatus {
		t.Helper()
		if err := s.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		got := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Status.Members {
			if m.ID == 2 {
				return m
			}
		}
		t.Fatalf("no cp-2 in %+v", got.Status.Members)
		return api.EtcdMemberStatus{}
	}
	fake.set(leader(1000), learner(100, true))
	if m := read(); m.Role != api.RoleLearner || m.Progress != 0.1 || m.ETA != 0 {
		t.Errorf("first sample: %+v, want 10%% and no ETA yet", m)
	}
	now = now.Add(time.Second)
	fake.set(leader(1000), learner(500, true))
	if m := read(); m.Progress != 0.5 || m.ETA != api.Duration(1300*time.Millisecond) {
		t.Errorf("second sample: %+v, want 50%% and 1.3s (500 left, closing at 400/s)", m)
	}
	now = now.Add(time.Second)
	fake.set(leader(1010), learner(1010, false))
	if m := read(); m.Role != api.RoleVoter || m.Progress != 0 || m.ETA != 0 {
		t.Errorf("promoted: %+v, want a voter with no progress", m)
	}
}

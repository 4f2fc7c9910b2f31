package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestNoSpaceHoldsAJoinUntilReclaimed: the EtcdCluster declares a 16 MiB
// quota before cp-2 joins, so cp-2's member starts with it (cp-1, the
// bootstrap host, runs etcd's default). cp-3's join is held in the
// leader's observer at its first step while the database is filled past
// cp-2's quota through history (four keys overwritten): etcd raises
// NOSPACE and refuses writes. Released, the join cannot be journaled, and
// every later pass waits, naming the alarm: no operation is journaled and
// no member added while it is raised (no step calling etcd's member API
// is applied while etcd lists an alarm). The leader compacts, defragments
// cp-2 and cp-1 (its file, past the declared quota, is what a learner
// receives as its snapshot) and disarms it below the quota, writes are
// accepted, and only then is cp-3 added, through a learner that raises
// no alarm, to three voters.
func TestNoSpaceHoldsAJoinUntilReclaimed(t *testing.T) {
	t.Parallel()
	const quota = 16 << 20
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	ctx := t.Context()
	st := f.Store()
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 3
	ec.Spec.Policy.QuotaBackendBytes = quota
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		held     bool
		waits    []string
		startsIn []string // membership changes applied while NOSPACE is raised
		// underAlarm holds the member-API steps that began while it was.
		underAlarm = map[string]bool{}
	)
	cli := f.Client()
	raised := func() bool {
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		alarms, err := cli.AlarmList(actx)
		return err != nil || len(alarms.Alarms) > 0
	}
	atJoin, release := make(chan struct{}), make(chan struct{})
	f.StartCoordinator("c-1", func(c *coord) {
		c.Observer.OnMembershipStep = func(s membership.Step) {
			mu.Lock()
			first := s.Action == membership.StartJoin && s.Request == "cp-3" && !held
			held = held || first
			mu.Unlock()
			if first {
				close(atJoin)
				<-release
				return
			}
			switch s.Action {
			case membership.Wait:
				if raised() {
					mu.Lock()
					waits = append(waits, s.Reason)
					mu.Unlock()
				}
			case membership.AddLearner, membership.Promote, membership.AbortJoin, membership.TransferLeader, membership.RemoveMember:
				r := raised()
				mu.Lock()
				underAlarm[s.String()] = r
				mu.Unlock()
			}
		}
		// A call to etcd's member API that went through although the
		// alarm was raised when its step began (a step planned from an
		// observation just before the alarm may begin; its call must not
		// go through: the executor asks the learner's status, which
		// reports the alarm, right before promoting it). A change whose
		// own entry raises the alarm (a member whose database is past its
		// quota raises it at the first entry it applies) is not one.
		c.Observer.OnMembershipChanged = func(s membership.Step) {
			mu.Lock()
			defer mu.Unlock()
			if underAlarm[s.String()] {
				startsIn = append(startsIn, s.String())
			}
		}
	})
	f.Start(f.AgentConfig("cp-2", false))
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	statusOf := func(name string) (int64, int64) {
		ep := f.Node(name).Cfg.ClientURL
		s, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
		return s.DbSize, s.DbSizeQuota
	}
	if _, q := statusOf("cp-2"); q != quota {
		t.Fatalf("cp-2 joined with quota %d, want the EtcdCluster's %d", q, quota)
	}
	if _, q := statusOf("cp-1"); q != api.DefaultQuotaBackendBytes {
		t.Fatalf("cp-1 (started before the quota) runs %d, want etcd's default", q)
	}

	f.Start(f.AgentConfig("cp-3", false))
	select {
	case <-atJoin:
	case <-time.After(60 * time.Second):
		t.Fatal("cp-3's join never reached the leader")
	}
	filled := time.Now()
	val := strings.Repeat("h", 256<<10)
	full := false
	for i := 0; i < 1000 && !full; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/history/%d", i%4), val)
		switch {
		case etcdadmin.NoSpace(err):
			full = true
		case err != nil:
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("cp-2's quota was never reached")
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	testwait.For(t, 90*time.Second, "NOSPACE disarmed and a write accepted", func() (bool, string) {
		alarms, err := cli.AlarmList(ctx)
		if err != nil || len(alarms.Alarms) > 0 {
			return false, fmt.Sprintf("alarms %v %v", alarms, err)
		}
		_, err = cli.Put(ctx, "/probe", "1")
		return err == nil, fmt.Sprint(err)
	})
	disarmed := time.Now()
	mu.Lock()
	gotWaits := waits
	mu.Unlock()
	t.Logf("NOSPACE raised to disarmed: %s; %d waiting passes", disarmed.Sub(filled).Round(time.Millisecond), len(gotWaits))
	named := false
	for _, w := range gotWaits {
		named = named || strings.Contains(w, "NOSPACE alarm is raised")
	}
	if !named {
		t.Errorf("no waiting pass named the alarm: %v", gotWaits)
	}
	if size, q := statusOf("cp-2"); size >= q {
		t.Errorf("cp-2 after the disarm: database %d, quota %d", size, q)
	}
	// cp-1 (etcd's default quota) never raised the alarm, but its file
	// grew as cp-2's with the same history: a learner's snapshot is the
	// leader's file, so the reclaim defragments every voter before the
	// disarm lets the join go on. Each file is then about the live data
	// (four 256 KiB values), far below the quota.
	for _, name := range []string{"cp-1", "cp-2"} {
		if size, _ := statusOf(name); size >= quota/4 {
			t.Errorf("%s after the disarm: database file %d bytes, not defragmented (declared quota %d, which a joiner starts with)", name, size, quota)
		}
	}
	if len(members.Members) != 2 {
		t.Errorf("members when NOSPACE was raised: %v", members.Members)
	}
	f.WaitVoters(120*time.Second, "cp-1", "cp-2", "cp-3")
	mu.Lock()
	if len(startsIn) > 0 {
		t.Errorf("membership changes applied under NOSPACE: %v", startsIn)
	}
	mu.Unlock()
	var got *api.EtcdCluster
	testwait.For(t, 30*time.Second, "the episode in status", func() (bool, string) {
		got = &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, got); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err.Error()
		}
		// cp-2's: cp-3 joins with a snapshot below its quota.
		ep := got.Status.NoSpace
		return ep != nil && !ep.DisarmedAt.IsZero() && len(ep.Members) == 1 && ep.Members[0] == "cp-2" &&
			ep.DBSizeAfter < quota && ep.DBSizeQuota == quota, fmt.Sprintf("%+v", ep)
	})
}

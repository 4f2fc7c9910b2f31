package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// noSpaceQuota is the quota the NOSPACE scenario gives cp-3's member.
const noSpaceQuota = 16 << 20

// TestVoterNoSpace: the EtcdCluster's spec.policy.quotaBackendBytes is
// set to 16 MiB and cp-3's agent restarted (kill -9), so that its member
// starts with that quota (the others keep etcd's 2 GiB). Under the
// workload, a few keys are overwritten with 256 KiB values until cp-3's
// database passes its quota: etcd raises NOSPACE and refuses every write.
// Within 90 s nico compacts the history, defragments and disarms the
// alarm, below the quota; meanwhile no membership operation starts and
// the members stay the same. Writes are accepted again, the EtcdCluster's
// status records the episode and a NoSpaceReclaimed event is derived.
func TestVoterNoSpace(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "a voter's database past its quota (NOSPACE), space reclaimed", 3, 3)
	c := s.c
	evs := s.followEvents()
	s.setQuota(noSpaceQuota)
	s.fault("cp-3", true)
	c.killAgent(2)
	c.startAgent(2)
	testwait.For(t, 90*time.Second, "cp-3's member to serve with the quota", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := s.cli.Status(ctx, c.clientURL(2))
		if err != nil {
			return false, err.Error()
		}
		return st.DbSizeQuota == noSpaceQuota, fmt.Sprintf("quota %d", st.DbSizeQuota)
	})
	s.waitCaughtUp(60 * time.Second)
	s.fault("cp-3", false)
	s.startWorkload(3, 16)
	s.waitWrites(30*time.Second, 100)
	before := s.memberIDs()

	filled, fillOps := s.fillPastQuota()
	t.Logf("NOSPACE after %d writes of 256 KiB", fillOps)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	alarms, err := s.cli.AlarmList(ctx)
	cancel()
	cp3, _ := s.memberID(2)
	if err != nil || !slices.ContainsFunc(alarms.Alarms, func(a *etcdserverpb.AlarmMember) bool {
		return a.MemberID == cp3 && a.Alarm.String() == etcdadmin.AlarmNoSpace
	}) {
		t.Errorf("alarms right after the fill: %v, %v; want NOSPACE on cp-3 (%x)", alarms, err, cp3)
	}
	var disarmed time.Time
	testwait.For(t, 90*time.Second, "NOSPACE disarmed and writes accepted", func() (bool, string) {
		if got := s.memberIDs(); got != nil && !slices.Equal(got, before) {
			t.Fatalf("members changed under NOSPACE: %x, were %x", got, before)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		alarms, err := s.cli.AlarmList(ctx)
		if err != nil || len(alarms.Alarms) > 0 {
			return false, fmt.Sprintf("alarms %v %v", alarms, err)
		}
		if _, err := s.cli.Put(ctx, "/faults/nospace-probe", time.Now().String()); err != nil {
			return false, "put: " + err.Error()
		}
		disarmed = time.Now()
		return true, ""
	})
	took := disarmed.Sub(filled)
	t.Logf("NOSPACE raised to writes accepted again: %s", took.Round(time.Millisecond))
	if ops := s.opsSince(filled); len(ops) > 0 {
		t.Errorf("operations started under NOSPACE: %v", ops)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	st, err := s.cli.Status(ctx, c.clientURL(2))
	cancel()
	if err != nil || st.DbSize >= noSpaceQuota {
		t.Errorf("cp-3 after the disarm: %v, %v; want a database below %d", st, err, noSpaceQuota)
	}
	testwait.For(t, 30*time.Second, "the episode in the EtcdCluster's status and its event", func() (bool, string) {
		ec := &api.EtcdCluster{}
		if err := s.st.Get(t.Context(), store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		ep := ec.Status.NoSpace
		ok := ep != nil && slices.Contains(ep.Members, "cp-3") && !ep.DisarmedAt.IsZero() && ep.DBSizeAfter < noSpaceQuota &&
			ep.DBSizeQuota == noSpaceQuota && ep.CompactedAt > 0 && evs.has(events.NoSpaceReclaimed, "cp-3")
		return ok, fmt.Sprintf("episode %+v, event %v", ep, evs.has(events.NoSpaceReclaimed, "cp-3"))
	})
	s.waitWrites(30*time.Second, 50)
	s.finish(took)
}

// setQuota writes spec.policy.quotaBackendBytes into the EtcdCluster,
// compare-and-swapped on its revision (the leader writes its status).
func (s *scenario) setQuota(q int64) {
	s.t.Helper()
	testwait.For(s.t, 30*time.Second, "the quota written", func() (bool, string) {
		ec := &api.EtcdCluster{}
		if err := s.st.Get(s.t.Context(), store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		ec.Spec.Policy.QuotaBackendBytes = q
		err := s.st.Update(s.t.Context(), store.EtcdClusterKey, ec)
		return err == nil, fmt.Sprint(err)
	})
}

// fillPastQuota overwrites four keys with 256 KiB values until etcd
// answers NOSPACE, and returns when and after how many writes.
func (s *scenario) fillPastQuota() (time.Time, int) {
	s.t.Helper()
	val := strings.Repeat("n", 256<<10)
	for i := 0; i < 2000; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.cli.Put(ctx, fmt.Sprintf("/faults/fill/%d", i%4), val)
		cancel()
		switch {
		case etcdadmin.NoSpace(err):
			return time.Now(), i + 1
		case err != nil:
			s.t.Logf("fill write %d: %v", i, err)
		}
	}
	s.t.Fatalf("2000 writes of 256 KiB never passed cp-3's %d-byte quota", noSpaceQuota)
	return time.Time{}, 0
}

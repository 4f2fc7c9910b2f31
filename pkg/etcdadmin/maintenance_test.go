package etcdadmin

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestStatusesAlarmsDefragment: on three real members, Statuses reports
// each with the fields of etcd's Status, Alarms is empty, and Defragment
// of a follower succeeds.
func TestStatusesAlarmsDefragment(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	a := New(c.Client(t), etcdtest.CallBudget)
	defer a.Close()
	ctx := t.Context()
	ms, err := a.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("%d members", len(ms))
	}
	var follower string
	for _, m := range ms {
		if !m.Reachable || m.Version == "" || m.DBSize == 0 || m.DBSizeInUse == 0 || m.DBSizeQuota == 0 || m.Leader == 0 || m.RaftTerm == 0 || m.RaftIndex == 0 || m.AppliedIndex == 0 {
			t.Errorf("member %+v lacks a field of its status", m)
		}
		if m.Leader != m.ID {
			follower = m.ClientURLs[0]
		}
	}
	alarms, err := a.Alarms(ctx)
	if err != nil || len(alarms) != 0 {
		t.Errorf("Alarms = %v, %v", alarms, err)
	}
	if err := a.Defragment(ctx, follower, 30*time.Second); err != nil {
		t.Errorf("Defragment(%s): %v", follower, err)
	}
	// A member that is gone is reported, not fatal. Its status call waits
	// out the admin's health timeout: this admin's is goneBudget, long
	// enough for the members that serve.
	c.Members[2].Close()
	short := New(c.Client(t), goneBudget)
	defer short.Close()
	ms, err = short.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := 0
	for _, m := range ms {
		if !m.Reachable && m.Err != "" {
			down++
		}
	}
	if down != 1 {
		t.Errorf("%d members unreachable, want 1: %+v", down, ms)
	}
}

// goneBudget is the health timeout of an admin that asks a member that is
// gone: each such call waits all of it.
const goneBudget = 8 * time.Second

func TestNoSpace(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]bool{
		nil:                     false,
		rpctypes.ErrNoSpace:     true,
		rpctypes.ErrGRPCNoSpace: true,
		fmt.Errorf("store: fenced txn: %w", rpctypes.ErrNoSpace): true,
		errors.New("etcdserver: mvcc: database space exceeded"):  false,
		rpctypes.ErrUnhealthy: false,
	} {
		if got := NoSpace(err); got != want {
			t.Errorf("NoSpace(%v) = %v, want %v", err, got, want)
		}
	}
}

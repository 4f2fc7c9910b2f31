package member_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// statusPollers is how many clients poll the removed member's Status, and
// statusPollEvery how often each does.
const (
	statusPollers   = 4
	statusPollEvery = 2 * time.Millisecond
)

// testRemovedWhilePolled: a voter is removed while clients keep asking it
// for its Status, as monitoring does. etcd drops the member from its own
// membership, then closes its backend, while its gRPC server still takes
// calls; a Status in either window can panic the process (IsLearner:
// "failed to find local ID in cluster members"; StorageVersion: nil
// pointer in bbolt). The member must exit with ErrRemoved, every poll must
// have been answered or refused, and the remaining member keeps serving.
func testRemovedWhilePolled(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	a, b := rs.new(), rs.new()
	stopAll(t, a, b)
	cfgA := rs.config(t, "a")
	if err := a.Start(ctx, cfgA); err != nil {
		t.Fatalf("start a: %v", err)
	}
	cli := etcdtest.NewClient(t, cfgA.ClientURL)
	cfgB := rs.config(t, "b")
	added := memberAddAsLearner(ctx, t, cli, cfgB.PeerURL)
	cfgB.InitialCluster = initialCluster(added, cfgB.Name)
	cfgB.ClusterState = member.StateExisting
	cfgB.ClusterToken = cfgA.ClusterToken
	if err := b.Start(ctx, cfgB); err != nil {
		t.Fatalf("start learner b: %v", err)
	}
	promote(ctx, t, cli, added.Member.ID)

	pctx, stopPolls := context.WithCancel(ctx)
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	for range statusPollers {
		pc := etcdtest.NewClient(t, cfgB.ClientURL)
		wg.Go(func() {
			tick := time.NewTicker(statusPollEvery)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				sctx, cancel := context.WithTimeout(pctx, time.Second)
				_, err := pc.Status(sctx, cfgB.ClientURL)
				cancel()
				if err == nil {
					answered.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	defer func() { stopPolls(); wg.Wait() }()
	eventuallyAnswered(ctx, t, &answered, statusPollers)

	retry(ctx, t, "MemberRemove", func() error { _, err := cli.MemberRemove(ctx, added.Member.ID); return err })
	waitDone(ctx, t, b)
	stopPolls()
	wg.Wait()
	t.Logf("polls of the removed member: %d answered, %d refused", answered.Load(), refused.Load())
	if err := b.Err(); !errors.Is(err, member.ErrRemoved) {
		t.Fatalf("b.Err() = %v, want ErrRemoved", err)
	}
	if _, err := cli.Put(ctx, "after-removal", "x"); err != nil {
		t.Fatalf("a does not serve after b's removal: %v", err)
	}
}

// initialCluster is the --initial-cluster for the member just added, named
// name, from the MemberAdd response.
func initialCluster(added *clientv3.MemberAddResponse, name string) string {
	var parts []string
	for _, m := range added.Members {
		n := m.Name
		if m.ID == added.Member.ID {
			n = name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// promote promotes a learner, retrying while it has not caught up.
func promote(ctx context.Context, t *testing.T, cli *clientv3.Client, id uint64) {
	t.Helper()
	retry(ctx, t, "MemberPromote", func() error { _, err := cli.MemberPromote(ctx, id); return err })
}

// retry calls op until it succeeds: a young cluster refuses reconfiguration
// ("unhealthy cluster", a learner "not in sync") for a while.
func retry(ctx context.Context, t *testing.T, what string, op func() error) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for tries := 1; ; tries++ {
		err := op()
		if err == nil {
			return
		}
		if tries == 1 {
			t.Logf("%s: %v (retrying)", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v: %v", what, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// eventuallyAnswered waits until the pollers have had n answers.
func eventuallyAnswered(ctx context.Context, t *testing.T, answered *atomic.Int64, n int64) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for answered.Load() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("status pollers got %d answers, want %d: %v", answered.Load(), n, ctx.Err())
		case <-tick.C:
		}
	}
}

package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRestartWithTheDataOfARemovedMember: the agent starts on the data dir
// of a member the cluster removed (its last run ended before it could wipe
// it) and etcd.endpoints do not answer, so it restarts the member from its
// data; the cluster's peers tell the member it was removed. That start used
// to fail the agent ("member: removed from the cluster: listener ...
// failed: server is stopping") at every restart; the agent must wipe the
// data dir (keeping the copy) and go on to join anew.
func TestRestartWithTheDataOfARemovedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	timings := member.WithTimings(50*time.Millisecond, 500*time.Millisecond)
	a, b := member.NewEmbedded(timings), member.NewEmbedded(timings)
	cfgA, cfgB := plainMember(t, "a"), plainMember(t, "b")
	if err := a.Start(ctx, cfgA); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	cli := etcdtest.NewClient(t, cfgA.ClientURL)
	var added *clientv3.MemberAddResponse
	retryUntil(ctx, t, "MemberAddAsLearner", func() (err error) {
		added, err = cli.MemberAddAsLearner(ctx, []string{cfgB.PeerURL})
		return err
	})
	cfgB.InitialCluster = cfgA.Name + "=" + cfgA.PeerURL + "," + cfgB.Name + "=" + cfgB.PeerURL
	cfgB.ClusterState = member.StateExisting
	if err := b.Start(ctx, cfgB); err != nil {
		t.Fatal(err)
	}
	retryUntil(ctx, t, "MemberRemove", func() error { _, err := cli.MemberRemove(ctx, added.Member.ID); return err })
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("removed member did not exit")
	}

	rt := member.NewEmbedded(timings)
	ag := New(Config{
		Name: "b", Roles: []api.Role{api.RoleControlPlane}, DataDir: cfgB.DataDir,
		PeerURL: cfgB.PeerURL, ClientURL: cfgB.ClientURL, ClusterToken: cfgB.ClusterToken, DialTimeout: 3 * time.Second,
	}, rt, quietNotifier{}, logging.Test(t))
	err := ag.member.prepare(ctx)
	_ = rt.Stop(context.Background())
	if err != nil {
		t.Fatalf("member.prepare on a removed member's data: %v, want it wiped and nil", err)
	}
	if ag.state.memberRunning() {
		t.Fatal("the removed member counts as running")
	}
	if has, err := member.HasData(cfgB.DataDir); err != nil || has {
		t.Fatalf("data dir after member.prepare: has data %v, %v; want wiped", has, err)
	}
	if copies, _ := filepath.Glob(cfgB.DataDir + ".wiped-*"); len(copies) != 1 {
		t.Fatalf("copies of the wiped data dir: %v, want one", copies)
	}
}

// plainMember is a member config on fresh plaintext loopback URLs.
func plainMember(t *testing.T, name string) member.Config {
	peer, client := etcdtest.URLsFor(t, false)
	return member.Config{
		Name: name, DataDir: filepath.Join(t.TempDir(), name), PeerURL: peer, ClientURL: client,
		ClusterToken: "restart-removed", Logger: logging.Test(t),
	}
}

// retryUntil calls op until it succeeds: a young cluster refuses
// reconfiguration for a while ("unhealthy cluster").
func retryUntil(ctx context.Context, t *testing.T, what string, op func() error) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := op()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("%s: %v (retrying)", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v: %v", what, err, ctx.Err())
		case <-tick.C:
		}
	}
}

package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
)

// TestFencedDataDirIsWipedNotServed: a restore or recovery fenced this
// node's data dir (its cluster was superseded). Even with no cluster
// answering at etcd.endpoints, where the agent would otherwise restart the
// member from its data, the agent wipes the dir (keeping the copy) and
// joins anew: an old member never serves beside the new cluster (the split
// brain of k3s #11992). Without the fence check it restarted the member.
func TestFencedDataDirIsWipedNotServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	timings := member.WithTimings(50*time.Millisecond, 500*time.Millisecond)
	cfg := plainMember(t, "a")
	old := member.NewEmbedded(timings)
	if err := old.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := member.WriteFence(cfg.DataDir, member.Fence{By: "restore-1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rt := member.NewEmbedded(timings)
	ag := New(Config{
		Name: "a", Roles: []api.Role{api.RoleControlPlane}, DataDir: cfg.DataDir, Endpoints: []string{"http://127.0.0.1:9"},
		PeerURL: cfg.PeerURL, ClientURL: cfg.ClientURL, ClusterToken: cfg.ClusterToken, DialTimeout: time.Second,
	}, rt, quietNotifier{}, logging.Test(t))
	err := ag.member.prepare(ctx)
	_ = rt.Stop(context.Background())
	if err != nil {
		t.Fatalf("member.prepare on a fenced data dir: %v, want it wiped and nil", err)
	}
	if ag.state.memberRunning() {
		t.Fatal("the fenced member was started")
	}
	if has, err := member.HasData(cfg.DataDir); err != nil || has {
		t.Fatalf("data dir after member.prepare: has data %v, %v; want wiped", has, err)
	}
	if copies, _ := filepath.Glob(cfg.DataDir + ".wiped-*"); len(copies) != 1 {
		t.Fatalf("copies of the wiped data dir: %v, want one", copies)
	}
}

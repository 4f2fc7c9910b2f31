package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
)

// TestBootstrapRefusedAfterLostData: the bootstrap host's member data is
// gone (removed by hand: no .wiped-* copy) while its endpoints cache names
// the cluster it was part of, and etcd.endpoints are not set. It used to
// bootstrap a new single-member cluster there, with the same member and
// cluster IDs as the old one (both follow from the name, peer URL and
// token), serving an empty keyspace at its endpoint beside the real
// cluster; it must refuse and start nothing.
func TestBootstrapRefusedAfterLostData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peer, client := etcdtest.URLsFor(t, false)
	dir := t.TempDir()
	cache := filepath.Join(dir, "etcd-endpoints.json")
	b, _ := json.Marshal(endpointsCache{Endpoints: []string{"http://127.0.0.1:1", client}, SavedAt: time.Now()})
	if err := os.WriteFile(cache, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	defer func() { _ = rt.Stop(context.Background()) }()
	ag := New(Config{
		Name: "a", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true, DataDir: filepath.Join(dir, "etcd"),
		PeerURL: peer, ClientURL: client, ClusterToken: "bootstrap-wiped", DialTimeout: time.Second, EndpointsCache: cache,
	}, rt, quietNotifier{}, logging.Test(t))
	err := ag.prepareMember(ctx)
	if err == nil || !strings.Contains(err.Error(), "bootstrap refused") {
		t.Fatalf("prepareMember = %v, want bootstrap refused", err)
	}
	if ag.running.Load() {
		t.Fatal("a member runs")
	}
	if has, err := member.HasData(filepath.Join(dir, "etcd")); err != nil || has {
		t.Fatalf("data dir: has data %v, %v; want none", has, err)
	}
}

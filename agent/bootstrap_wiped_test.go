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
// the cluster it was part of, and etcd.endpoints are not set. Bootstrapping
// there would make a new single-member cluster, with the same member and
// cluster IDs as the old one (both follow from the name, peer URL and
// token), serving an empty keyspace at its endpoint beside the real
// cluster; it must refuse and start nothing.
func TestBootstrapRefusedAfterLostData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peer, client := etcdtest.URLsFor(t, false)
	dir := t.TempDir()
	cache := filepath.Join(dir, "etcd-endpoints.json")
	b, _ := json.Marshal(endpointsRecord{Endpoints: []string{"http://127.0.0.1:1", client}, SavedAt: time.Now()})
	if err := os.WriteFile(cache, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	defer func() { _ = rt.Stop(context.Background()) }()
	ag := New(Config{
		Name: "a", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true, DataDir: filepath.Join(dir, "etcd"),
		PeerURL: peer, ClientURL: client, ClusterToken: "bootstrap-wiped", DialTimeout: time.Second, EndpointsCache: cache,
	}, rt, quietNotifier{}, logging.Test(t))
	err := ag.member.prepare(ctx)
	if err == nil || !strings.Contains(err.Error(), "bootstrap refused") {
		t.Fatalf("member.prepare = %v, want bootstrap refused", err)
	}
	if ag.state.memberRunning() {
		t.Fatal("a member runs")
	}
	if has, err := member.HasData(filepath.Join(dir, "etcd")); err != nil || has {
		t.Fatalf("data dir: has data %v, %v; want none", has, err)
	}
}

// TestBootstrapRefusedAfterItBootstrapped: a bootstrap host whose data is
// lost before its endpoints cache names any other member (the cluster had
// just formed; here there is no cache at all) must still refuse: it
// records that it created the cluster beside the data dir. Only once the
// operator removes that record does it create a new cluster.
func TestBootstrapRefusedAfterItBootstrapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peer, client := etcdtest.URLsFor(t, false)
	dataDir := filepath.Join(t.TempDir(), "etcd")
	newAgent := func() (*Agent, member.Runtime) {
		rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
		return New(Config{
			Name: "a", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true, DataDir: dataDir,
			PeerURL: peer, ClientURL: client, ClusterToken: "bootstrapped-once", DialTimeout: time.Second,
		}, rt, quietNotifier{}, logging.Test(t)), rt
	}
	first, rt := newAgent()
	if err := first.member.prepare(ctx); err != nil {
		t.Fatalf("first bootstrap: %v", err)
	}
	mk, _, err := member.ReadMarker(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := member.ReadBootstrapped(dataDir)
	if err != nil || !ok || rec.ClusterID != mk.ClusterID || rec.MemberID != mk.MemberID {
		t.Fatalf("bootstrap record %+v, %v, %v; want cluster %x member %x", rec, ok, err, mk.ClusterID, mk.MemberID)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}

	again, rt := newAgent()
	defer func() { _ = rt.Stop(context.Background()) }()
	err = again.member.prepare(ctx)
	if err == nil || !strings.Contains(err.Error(), "bootstrap refused") || !strings.Contains(err.Error(), member.BootstrappedPath(dataDir)) {
		t.Fatalf("member.prepare after the data was lost = %v, want bootstrap refused naming %s", err, member.BootstrappedPath(dataDir))
	}
	if again.state.memberRunning() {
		t.Fatal("a member runs")
	}
	if has, err := member.HasData(dataDir); err != nil || has {
		t.Fatalf("data dir: has data %v, %v; want none", has, err)
	}

	if err := os.Remove(member.BootstrappedPath(dataDir)); err != nil {
		t.Fatal(err)
	}
	if err := again.member.prepare(ctx); err != nil {
		t.Fatalf("bootstrap after the record was removed: %v", err)
	}
	if !again.state.memberRunning() {
		t.Fatal("no member runs after the operator removed the record")
	}
}

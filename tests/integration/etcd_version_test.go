package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdMinorUpgradeRolls: three exec-runtime members on etcd 3.6.16,
// each given both binaries, with a client writing throughout. Refused
// spec.version values (a downgrade to an old patch, an unknown version)
// change nothing: no node is asked to change, no downgrade is enabled.
// spec.version 3.7.3 then rolls one member at a time: every member ends on
// 3.7.3, the cluster version is 3.7.0, the slot is free, and no write
// failed after its retries nor was lost. A restarted agent runs 3.7.3
// again, not its runtime's default.
func TestEtcdMinorUpgradeRolls(t *testing.T) {
	t.Parallel()
	bins := etcdtest.Binaries(t)
	paths := map[string]string{}
	for _, b := range bins {
		paths[b.Version] = b.Path
	}
	if paths["3.6.16"] == "" || paths["3.7.3"] == "" {
		t.Skipf("needs etcd 3.6.16 and 3.7.3 binaries (%s), have %v", etcdtest.EnvBinaries, paths)
	}
	byVersion, err := member.BinariesByVersion(context.Background(), []string{paths["3.6.16"], paths["3.7.3"]})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	f.NewRuntime = func() member.Runtime {
		return fleetkit.ExecRuntime(paths["3.6.16"],
			member.WithBinaries(byVersion), member.WithBinaryVersion("3.6.16"))
	}
	f.Grow("c-1", "cp-1", "cp-2", "cp-3")
	c := f.Coord("c-1")
	nodes := []string{"cp-1", "cp-2", "cp-3"}
	f.waitEtcdVersions(30*time.Second, "3.6.16", nodes...)
	waitObj[api.EtcdCluster](f, 30*time.Second, store.EtcdClusterKey, "the bootstrap EtcdCluster", func(*api.EtcdCluster) bool { return true })

	st := f.Store()
	ctx := t.Context()
	// Every write to etcdversions/ from here on, to check the refusals.
	start, err := st.Client().Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	from := start.Header.Revision + 1

	for _, refused := range []string{"3.5.20", "3.9.1"} {
		f.setEtcdVersion(refused)
		f.waitVersionPasses(c, 2)
		if resp, err := st.Client().Get(ctx, store.EtcdVersionsDir, clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("spec.version %s (refused) wrote desired versions: %v %v", refused, resp, err)
		}
	}
	adm := etcdadmin.New(f.Client(), etcdtest.CallBudget)
	t.Cleanup(adm.Close)
	if vs, err := adm.VersionState(ctx, f.Node("cp-1").Cfg.ClientURL); err != nil || vs.Downgrading || vs.Cluster != "3.6.0" {
		t.Fatalf("after refused paths: %+v %v, want cluster 3.6.0 and no downgrade", vs, err)
	}

	w := startWorkload(t, f.Client())
	f.setEtcdVersion("3.7.3")
	f.waitEtcdVersions(3*time.Minute, "3.7.3", nodes...)
	testwait.For(t, 60*time.Second, "cluster version 3.7.0 and the slot free", func() (bool, string) {
		vs, err := adm.VersionState(ctx, f.Node("cp-1").Cfg.ClientURL)
		if err != nil {
			return false, err.Error()
		}
		resp, err := st.Client().Get(ctx, store.ActiveOpKey)
		if err != nil {
			return false, err.Error()
		}
		return vs.Cluster == "3.7.0" && len(resp.Kvs) == 0, fmt.Sprintf("%+v, active-op %v", vs, resp.Kvs)
	})
	w.stopAndCheck(t)

	// A restarted agent, whose runtime defaults to 3.6.16, starts its
	// member on the version that last served its data (3.6.16 would
	// refuse the 3.7 schema).
	n3 := f.Node("cp-3")
	if err := n3.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	f.StartWith(n3.Cfg, f.NewRuntime())
	f.waitEtcdVersions(60*time.Second, "3.7.3", "cp-3")
	f.WaitVoters(60*time.Second, nodes...)

	// The refused versions were never asked of any node.
	hist, err := st.Client().Get(ctx, store.EtcdVersionsDir, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range hist.Kvs {
		v := &api.NodeEtcdVersion{}
		if err := store.Decode(kv, v); err != nil {
			t.Fatal(err)
		}
		if v.Spec.Version != "3.7.3" || kv.Version != 1 || kv.CreateRevision < from {
			t.Errorf("%s: desired %s (written %d times), want 3.7.3 once", kv.Key, v.Spec.Version, kv.Version)
		}
	}
	if len(hist.Kvs) != 3 {
		t.Errorf("%d nodes were asked to change version, want 3", len(hist.Kvs))
	}
}

// TestEtcdDowngradeGoesThroughTheDowngradeAPI: three exec members on etcd
// 3.7.3 go to 3.6.16: the leader enables etcd's downgrade (the cluster
// version drops to 3.6.0), the members restart on 3.6.16 one at a time,
// and etcd ends the downgrade once all run 3.6; no write fails.
func TestEtcdDowngradeGoesThroughTheDowngradeAPI(t *testing.T) {
	t.Parallel()
	bins := etcdtest.Binaries(t)
	paths := map[string]string{}
	for _, b := range bins {
		paths[b.Version] = b.Path
	}
	if paths["3.6.16"] == "" || paths["3.7.3"] == "" {
		t.Skipf("needs etcd 3.6.16 and 3.7.3 binaries (%s), have %v", etcdtest.EnvBinaries, paths)
	}
	byVersion, err := member.BinariesByVersion(context.Background(), []string{paths["3.6.16"], paths["3.7.3"]})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	f.NewRuntime = func() member.Runtime {
		return fleetkit.ExecRuntime(paths["3.7.3"],
			member.WithBinaries(byVersion), member.WithBinaryVersion("3.7.3"))
	}
	f.Grow("c-1", "cp-1", "cp-2", "cp-3")
	nodes := []string{"cp-1", "cp-2", "cp-3"}
	f.waitEtcdVersions(30*time.Second, "3.7.3", nodes...)
	waitObj[api.EtcdCluster](f, 30*time.Second, store.EtcdClusterKey, "the bootstrap EtcdCluster", func(*api.EtcdCluster) bool { return true })
	adm := etcdadmin.New(f.Client(), time.Second)
	t.Cleanup(adm.Close)
	url := f.Node("cp-1").Cfg.ClientURL

	w := startWorkload(t, f.Client())
	f.setEtcdVersion("3.6.16")
	testwait.For(t, 60*time.Second, "the downgrade enabled", func() (bool, string) {
		vs, err := adm.VersionState(t.Context(), url)
		if err != nil {
			return false, err.Error()
		}
		return vs.Downgrading || vs.Cluster == "3.6.0", fmt.Sprintf("%+v", vs)
	})
	f.waitEtcdVersions(3*time.Minute, "3.6.16", nodes...)
	testwait.For(t, 60*time.Second, "the downgrade finished at cluster version 3.6.0", func() (bool, string) {
		vs, err := adm.VersionState(t.Context(), url)
		if err != nil {
			return false, err.Error()
		}
		return !vs.Downgrading && vs.Cluster == "3.6.0", fmt.Sprintf("%+v", vs)
	})
	w.stopAndCheck(t)
}

// TestEtcdVersionRollHaltsWhenANodeCannotRunTheVersion: members with no
// etcd 3.7.3 binary, or one that does not start. The first node asked
// reports why and keeps serving 3.6.16 (on the binary that ran, started
// again), and after policy.versionStepTimeout the roll halts with the
// slot released: no other node is asked, and a membership change could
// run.
func TestEtcdVersionRollHaltsWhenANodeCannotRunTheVersion(t *testing.T) {
	t.Parallel()
	bins := etcdtest.Binaries(t)
	old := ""
	for _, b := range bins {
		if b.Version == "3.6.16" {
			old = b.Path
		}
	}
	if old == "" {
		t.Skipf("needs the etcd 3.6.16 binary (%s)", etcdtest.EnvBinaries)
	}
	for _, tt := range []struct {
		name     string
		binaries map[string]string
	}{
		{"no binary", map[string]string{"3.6.16": old}},
		{"a binary that does not start", map[string]string{"3.6.16": old, "3.7.3": "/bin/false"}},
	} {
		t.Run(tt.name, func(t *testing.T) { testVersionRollHalts(t, old, tt.binaries) })
	}
}

func testVersionRollHalts(t *testing.T, old string, binaries map[string]string) {
	f := newFleet(t)
	f.NewRuntime = func() member.Runtime {
		return fleetkit.ExecRuntime(old,
			member.WithBinaries(binaries), member.WithBinaryVersion("3.6.16"))
	}
	f.Grow("c-1", "cp-1", "cp-2", "cp-3")
	nodes := []string{"cp-1", "cp-2", "cp-3"}
	f.waitEtcdVersions(30*time.Second, "3.6.16", nodes...)
	waitObj[api.EtcdCluster](f, 30*time.Second, store.EtcdClusterKey, "the bootstrap EtcdCluster", func(*api.EtcdCluster) bool { return true })

	f.editEtcdCluster("spec.version 3.7.3, a 3 s step", func(ec *api.EtcdCluster) {
		ec.Spec.Version = "3.7.3"
		ec.Spec.Policy.VersionStepTimeout = api.Duration(3 * time.Second)
	})
	st := f.Store()
	var asked string
	testwait.For(t, 60*time.Second, "a node that reports it cannot run 3.7.3", func() (bool, string) {
		resp, err := st.Client().Get(t.Context(), store.EtcdVersionsDir, clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) == 0 {
			return false, fmt.Sprintf("no desired version yet (%v)", err)
		}
		asked = store.Name(string(resp.Kvs[0].Key))
		n := &api.Node{}
		if err := st.Get(t.Context(), store.NodeKey(asked), n); err != nil {
			return false, err.Error()
		}
		return n.Status.EtcdVersionError != "" && n.Status.EtcdVersion == "3.6.16", fmt.Sprintf("%s: %+v", asked, n.Status)
	})
	testwait.For(t, 30*time.Second, "the halted step's slot released", func() (bool, string) {
		resp, err := st.Client().Get(t.Context(), store.ActiveOpKey)
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Kvs) == 0, fmt.Sprintf("active-op %v", resp.Kvs)
	})
	op := &api.Operation{}
	if err := st.Get(t.Context(), store.OpKey("etcdversion-"+asked+"-3.7.3"), op); err != nil || op.Status.Phase != api.OpFailed {
		t.Fatalf("the halted step's operation: %+v %v, want Failed", op.Status, err)
	}
	f.waitVersionPasses(f.Coord("c-1"), 2)
	resp, err := st.Client().Get(t.Context(), store.EtcdVersionsDir, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after the halt %d nodes were asked (%v), want only %s", len(resp.Kvs), err, asked)
	}
	f.waitEtcdVersions(10*time.Second, "3.6.16", nodes...)
	if bad := fleetkit.UnhealthyMembers(t.Context(), f.Client()); len(bad) > 0 {
		t.Fatalf("unhealthy members after the halt: %v", bad)
	}
}

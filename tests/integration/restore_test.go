package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// TestRestoreFleetOfAgents: three agents joined through the coordinator,
// data written, a snapshot, more writes; agents and coordinator stopped
// and the restore run on their data dirs (as nicoctl restore does); then
// the same agents and a coordinator started again serve the restored data
// as a new cluster of three voters, the restore journaled as succeeded.
func TestRestoreFleetOfAgents(t *testing.T) {
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(3)
	f.StartCoordinator("c-1")
	for _, n := range []string{"cp-2", "cp-3"} {
		f.Start(f.AgentConfig(n, false))
	}
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := f.Client()
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/app/k%02d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := cli.Get(ctx, "/app/k00")
	if err != nil {
		t.Fatal(err)
	}
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	// A snapshot is of what its member applied: a linearizable read
	// through that member first makes it hold every write above.
	if _, err := etcdtest.NewClient(t, f.Endpoints()[0]).Get(ctx, "/app/k19"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(f.TempDir(), "snap.db")
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: f.Endpoints()[:1], TLS: rootTLS, DialTimeout: 5 * time.Second}, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/app/after", "lost by design"); err != nil {
		t.Fatal(err)
	}

	// The operator stops every agent and coordinator, then restores.
	f.StopAll()
	lf := &restore.LocalFleet{ClientTLS: rootTLS, Log: f.Log}
	names := []string{"cp-1", "cp-2", "cp-3"}
	for _, name := range names {
		c := f.Node(name).Cfg
		var tlsFiles *member.TLS
		if d := c.PKI.Dir; d != "" {
			tlsFiles = &member.TLS{TrustedCAFile: d.CACert(), ServerCertFile: d.Cert(pki.EtcdServerLeaf), ServerKeyFile: d.Key(pki.EtcdServerLeaf),
				PeerCertFile: d.Cert(pki.EtcdPeerLeaf), PeerKeyFile: d.Key(pki.EtcdPeerLeaf), ClientCertAuth: true, PeerClientCertAuth: true,
				ClientCertFile: d.Cert(pki.NodeLeaf), ClientKeyFile: d.Key(pki.NodeLeaf)}
		}
		lf.Members = append(lf.Members, &restore.LocalMember{Name: name, DataDir: c.DataDir, PeerURL: c.PeerURL, ClientURL: c.ClientURL, Runtime: f.NewRuntime(), TLS: tlsFiles})
	}
	j, err := restore.Prepare(ctx, restore.Request{Snapshot: snap, Target: "cp-2", Members: names, Prefix: store.DefaultPrefix, BumpRevision: 1_000_000, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	lf.ClusterToken = "nico-" + j.ID
	r := &restore.Runner{Fleet: lf, Journal: restore.FileJournal{Path: filepath.Join(f.TempDir(), "journal.json")}, Prefix: store.DefaultPrefix, Log: f.Log}
	if err := r.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	lf.Close() // nicoctl ends: the agents serve the members from here on

	for _, name := range names {
		f.Start(f.Node(name).Cfg)
	}
	f.StartCoordinator("c-2")
	f.WaitVoters(90*time.Second, names...)
	ncli := f.Client()
	for i := range 20 {
		resp, err := ncli.Get(ctx, fmt.Sprintf("/app/k%02d", i))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(i) {
			t.Fatalf("write /app/k%02d before the snapshot: %v %v", i, resp, err)
		}
	}
	after, err := ncli.Get(ctx, "/app/after")
	if err != nil || len(after.Kvs) != 0 {
		t.Fatalf("a write after the snapshot survived: %v %v", after, err)
	}
	if after.Header.ClusterId == before.Header.ClusterId || after.Header.Revision < j.Snapshot.Revision+1_000_000 {
		t.Fatalf("cluster %x revision %d after the restore; before %x, want a new cluster past revision %d",
			after.Header.ClusterId, after.Header.Revision, before.Header.ClusterId, j.Snapshot.Revision+1_000_000)
	}
	st := f.Store()
	testwait.For(t, 30*time.Second, "the restore journaled as succeeded and the slot free", func() (bool, string) {
		op := &api.Operation{}
		if err := st.Get(ctx, store.OpKey(j.ID), op); err != nil {
			return false, err.Error()
		}
		act, err := st.ActiveOp(ctx)
		return op.Status.Phase == api.OpSucceeded && act == nil && err == nil, fmt.Sprintf("phase %s, active %v %v", op.Status.Phase, act, err)
	})
	// The coordinator elected in the new cluster still serves joins: the
	// fleet is whole, not only restored.
	f.Start(f.AgentConfig("cp-4", false))
	f.SetVoters(3)
	testwait.For(t, 90*time.Second, "cp-4 joined as a voter or standby", func() (bool, string) {
		err := f.CheckVoterOrStandby("cp-4", f.Node("cp-4").Cfg.PeerURL)
		return err == nil, fmt.Sprint(err)
	})
}

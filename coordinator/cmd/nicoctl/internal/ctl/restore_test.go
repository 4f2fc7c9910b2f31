package ctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// TestRestoreCommand: nicoctl restore on a cluster whose member its
// "agent" (here the test) still serves holds the slot, fences the data
// dir and refuses until that member is stopped; run again, it resumes
// from its journal and restores; the member started again from its data
// dir serves the snapshot's data as a new cluster. recover on it is
// refused: it has quorum.
func TestRestoreCommand(t *testing.T) {
	ctx := testCtx(t)
	c := etcdtest.Start(t, 1)
	m := c.Members[0]
	st := newStore(t, c)
	ec := &api.EtcdCluster{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindEtcdCluster}, Metadata: api.ObjectMeta{Name: "etcd", CreatedAt: time.Now().UTC()}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	registerNode(t, st, m.Name, m)
	if _, err := st.Client().Put(ctx, "kept", "yes"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tlsCfg := etcdtest.ClientTLS(t, pki.RootIdentity)
	snap := filepath.Join(dir, "snap.db")
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: c.Endpoints(), TLS: tlsCfg, DialTimeout: 5 * time.Second}, snap); err != nil {
		t.Fatal(err)
	}
	old, err := st.Client().Get(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	fleet := writeFleetFile(t, dir, m)

	run(t, c.Endpoints(), "recover", "--fleet", fleet, "--yes").want(t, ExitRefused, []string{"m0"}, []string{"recover refused", "still has quorum"})
	run(t, c.Endpoints(), "restore", "--from", snap, "--fleet", fleet, "--target", "m9").want(t, ExitRefused, nil, []string{"target is not a member"})
	run(t, c.Endpoints(), "restore", "--from", snap, "--fleet", fleet).want(t, ExitRefused, []string{"verified"}, []string{"m0 still serves", "stop its nico-agent"})
	if act, err := st.Client().Get(ctx, store.ActiveOpKey); err != nil || len(act.Kvs) != 1 {
		t.Fatalf("the live cluster's slot is not held by the restore: %v %v", act, err)
	}
	// While that restore is unfinished, no other restore or recovery starts.
	other := filepath.Join(dir, "other.db")
	if err := os.Link(snap, other); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "restore", "--from", other, "--fleet", fleet).want(t, ExitRefused, nil, []string{"another operation is in flight", "at step StopAndFence"})
	run(t, nil, "recover", "--fleet", fleet, "--yes").want(t, ExitRefused, nil, []string{"another operation is in flight", "at step StopAndFence"})
	m.Close() // the agent stops
	run(t, nil, "restore", "--from", snap, "--fleet", fleet, "--timeout", "1s").want(t, 0, []string{"resuming at step StopAndFence", "done in"}, nil)

	// The agent starts the member again from its data dir.
	rt := member.NewEmbedded()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Start(sctx, member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, TLS: m.TLS}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	cli := etcdtest.NewClient(t, m.ClientURL)
	got, err := cli.Get(ctx, store.DefaultPrefix+"kept")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("restored data: %v %v", got, err)
	}
	if got.Header.ClusterId == old.Header.ClusterId {
		t.Fatalf("cluster ID %x unchanged by the restore", got.Header.ClusterId)
	}
	if act, _ := cli.Get(ctx, store.DefaultPrefix+store.ActiveOpKey); len(act.Kvs) != 0 {
		t.Fatalf("slot still held after the restore: %s", act.Kvs[0].Value)
	}
}

// TestRestoreAbort: a restore refused at its first step (the member is
// still served) is abandoned with --abort: its fence is removed, the live
// slot freed, the member untouched; past that step --abort is refused.
func TestRestoreAbort(t *testing.T) {
	ctx := testCtx(t)
	c := etcdtest.Start(t, 1)
	m := c.Members[0]
	st := newStore(t, c)
	ec := &api.EtcdCluster{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindEtcdCluster}, Metadata: api.ObjectMeta{Name: "etcd", CreatedAt: time.Now().UTC()}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	registerNode(t, st, m.Name, m)
	dir := t.TempDir()
	root := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	snap := filepath.Join(dir, "snap.db")
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: c.Endpoints(), TLS: etcdtest.ClientTLS(t, pki.RootIdentity), DialTimeout: 5 * time.Second}, snap); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(dir, "fleet.yaml")
	yaml := fmt.Sprintf("tls: {caFile: %q, certFile: %q, keyFile: %q}\nmembers:\n  - {name: %s, dataDir: %q, peerURL: %s, clientURL: %s}\n",
		root.CA, root.Cert, root.Key, m.Name, m.DataDir, m.PeerURL, m.ClientURL)
	if err := os.WriteFile(fleet, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, c.Endpoints(), "restore", "--abort", "--fleet", fleet).want(t, ExitNotFound, nil, []string{"no unfinished restore"})
	run(t, c.Endpoints(), "restore", "--from", snap, "--fleet", fleet).want(t, ExitRefused, nil, []string{"still serves"})
	if _, fenced, _ := member.ReadFence(m.DataDir); !fenced {
		t.Fatal("the refused restore did not fence the data dir")
	}
	run(t, c.Endpoints(), "restore", "--abort", "--fleet", fleet).want(t, 0, []string{"aborted"}, nil)
	if _, fenced, _ := member.ReadFence(m.DataDir); fenced {
		t.Fatal("the fence outlived --abort")
	}
	if act, err := st.Client().Get(ctx, store.ActiveOpKey); err != nil || len(act.Kvs) != 0 {
		t.Fatalf("the live slot after --abort: %v %v", act, err)
	}
	// The journal is free: the next restore is checked anew.
	run(t, c.Endpoints(), "restore", "--from", snap, "--fleet", fleet).want(t, ExitRefused, []string{"verified"}, []string{"still serves"})
	jf := restore.FileJournal{Path: fleet + ".journal.json"}
	j, ok, err := jf.Load()
	if err != nil || !ok {
		t.Fatalf("journal: %v %v", ok, err)
	}
	j.Step = restore.StepStart // as if the target had been restored
	if err := jf.Save(j); err != nil {
		t.Fatal(err)
	}
	run(t, c.Endpoints(), "restore", "--abort", "--fleet", fleet).want(t, ExitRefused, nil, []string{"cannot be abandoned"})
}

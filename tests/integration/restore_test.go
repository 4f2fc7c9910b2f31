package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
)

// TestRestoreFleetOfAgents: three agents joined through the coordinator,
// data written, a snapshot, more writes; agents and coordinator stopped
// and the restore run on their data dirs (as nicoctl restore does); then
// the same agents and a coordinator started again serve the restored data
// as a new cluster of three voters, the restore journaled as succeeded.
func TestRestoreFleetOfAgents(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := f.Client()
	f.putAppKeys(ctx, cli)
	snap, before := f.snapshotAppKeys(ctx, cli)
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)

	// The operator stops every agent and coordinator, then restores.
	f.StopAll()
	lf := &restore.LocalFleet{ClientTLS: rootTLS, Log: f.Log}
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
	after := f.checkRestored(ctx)
	if after.Header.ClusterId == before.Header.ClusterId || after.Header.Revision < j.Snapshot.Revision+1_000_000 {
		t.Fatalf("cluster %x revision %d after the restore; before %x, want a new cluster past revision %d",
			after.Header.ClusterId, after.Header.Revision, before.Header.ClusterId, j.Snapshot.Revision+1_000_000)
	}
	f.waitOpSucceeded(ctx, j.ID)
	// The coordinator elected in the new cluster still serves joins: the
	// fleet is whole, not only restored.
	f.SetVoters(3)
	f.joinAnother()
}

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
)

// TestRecoverFleetOfAgents: three agents, two of them lost for good (agent
// stopped, data dir gone). recover is refused while the three answer; after
// the loss it lists cp-1, makes it a one-member cluster with every write
// it had applied, and two new machines then join through the coordinator's
// normal learner path.
func TestRecoverFleetOfAgents(t *testing.T) {
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
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	urls := map[string]string{}
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		urls[n] = f.Node(n).Cfg.ClientURL
	}
	if err := restore.CheckQuorumLost(ctx, restore.Survey(ctx, urls, rootTLS, time.Second), 3, rootTLS, 2*time.Second); err == nil {
		t.Fatal("recover allowed while all three voters answer")
	}
	f.Coord("c-1").Stop()
	for _, n := range []string{"cp-2", "cp-3"} {
		if err := f.Node(n).Stop(); err != nil {
			t.Logf("stop %s: %v", n, err)
		}
		if err := os.RemoveAll(f.Node(n).Cfg.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	survivors := restore.Survey(ctx, urls, rootTLS, time.Second)
	if err := restore.CheckQuorumLost(ctx, survivors, 3, rootTLS, 2*time.Second); err != nil {
		t.Fatalf("one of three voters left: %v", err)
	}
	j, err := restore.RecoverJournal(survivors, nil, time.Now())
	if err != nil || j.Target != "cp-1" {
		t.Fatalf("RecoverJournal = %+v, %v; want cp-1", j, err)
	}
	// The operator stops cp-1's agent; nicoctl recover runs its member.
	cfg := f.Node("cp-1").Cfg
	if err := f.Node("cp-1").Stop(); err != nil {
		t.Logf("stop cp-1: %v", err)
	}
	d := cfg.PKI.Dir
	lf := &restore.LocalFleet{ClientTLS: rootTLS, Log: f.Log, Members: []*restore.LocalMember{{Name: "cp-1", DataDir: cfg.DataDir, PeerURL: cfg.PeerURL, ClientURL: cfg.ClientURL, Runtime: f.NewRuntime(),
		TLS: &member.TLS{TrustedCAFile: d.CACert(), ServerCertFile: d.Cert(pki.EtcdServerLeaf), ServerKeyFile: d.Key(pki.EtcdServerLeaf),
			PeerCertFile: d.Cert(pki.EtcdPeerLeaf), PeerKeyFile: d.Key(pki.EtcdPeerLeaf), ClientCertAuth: true, PeerClientCertAuth: true}}}}
	r := &restore.Runner{Fleet: lf, Journal: restore.FileJournal{Path: filepath.Join(f.TempDir(), "journal.json")}, Prefix: store.DefaultPrefix, Log: f.Log}
	if err := r.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	lf.Close()

	f.Forget("cp-2")
	f.Forget("cp-3")
	f.Start(cfg)
	f.WaitVoters(60*time.Second, "cp-1")
	ncli := f.Client()
	for i := range 20 {
		resp, err := ncli.Get(ctx, fmt.Sprintf("/app/k%02d", i))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("write /app/k%02d applied before the loss: %v %v", i, resp, err)
		}
	}
	f.StartCoordinator("c-2")
	for _, n := range []string{"cp-4", "cp-5"} {
		f.Start(f.AgentConfig(n, false))
	}
	f.WaitVoters(120*time.Second, "cp-1", "cp-4", "cp-5")
}

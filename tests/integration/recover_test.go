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

// surveyBudget bounds the status call of each member a test's survey
// asks (restore.Survey): a member that answers on a loaded machine, a
// new TLS connection and a status call, has it whole.
const surveyBudget = 10 * time.Second

// TestRecoverFleetOfAgents: three agents, two of them lost for good (agent
// stopped, data dir gone). recover is refused while the three answer; after
// the loss it lists cp-1, makes it a one-member cluster with every write
// it had applied, and two new machines then join through the coordinator's
// normal learner path.
func TestRecoverFleetOfAgents(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f.putAppKeys(ctx, f.Client())
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	urls := map[string]string{}
	for _, n := range names {
		urls[n] = f.Node(n).Cfg.ClientURL
	}
	// Each member's status within surveyBudget: an answer that comes is
	// never cut short by a loaded machine; a lost member refuses at once.
	if err := restore.CheckQuorumLost(ctx, restore.Survey(ctx, urls, rootTLS, surveyBudget), 3, rootTLS, 2*time.Second); err == nil {
		t.Fatal("recover allowed while all three voters answer")
	}
	f.loseForGood(nil)
	survivors := restore.Survey(ctx, urls, rootTLS, surveyBudget)
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
	f.regrowRecovered(ctx)
}

package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// TestRecoverThroughAgentsWithAStandby: three voters and a standby; two
// voters lost for good. The recovery through the agents forces cp-1 into
// a one-member cluster and leaves the standby as it was (not held, not
// rejoined by the recovery); once it is done the coordinator, no longer
// held, grows the cluster back with the standby and a new machine.
func TestRecoverThroughAgentsWithAStandby(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	f.joinAnother() // cp-4: a standby
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f.putAppKeys(ctx, f.Client())
	hosts := serveRecovery(f, append(names, "cp-4")...)
	f.loseForGood(hosts.lose)
	f.Forget("cp-2")
	f.Forget("cp-3")
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	journal := filepath.Join(f.TempDir(), "journal.json")
	code, out, errOut := runNicoctl(t, "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"recover", "--agents", hosts.addr("cp-1"), "--yes", "--voters", "3", "--journal", journal)
	if code != 0 || !strings.Contains(out, "voters cp-1, each member served by its agent again") {
		t.Fatalf("nicoctl recover: exit %d, want cp-1 recovered alone\n%s%s", code, out, errOut)
	}
	t.Logf("nicoctl recover:\n%s", out)
	j, _, err := restore.FileJournal{Path: journal}.Load()
	if err != nil || j.Target != "cp-1" || len(j.Others) != 0 {
		t.Fatalf("journal %+v %v, want cp-1 recovered and no other member (cp-4 a standby)", j, err)
	}
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	h := (&restore.AgentFleet{Agents: map[string]string{"cp-4": hosts.addr("cp-4")}, TLS: rootTLS}).Survey(ctx, 5*time.Second)[0]
	if h.Held != "" || h.Data == restore.DataFenced {
		t.Fatalf("standby cp-4 after the recovery: %+v, want untouched", h)
	}
	f.WaitVoters(60*time.Second, "cp-1")
	f.checkAppKeys(ctx, f.Client(), "applied before the loss")
	f.StartCoordinator("c-2")
	f.Start(f.AgentConfig("cp-5", false))
	f.WaitVoters(120*time.Second, "cp-1", "cp-4", "cp-5")
}

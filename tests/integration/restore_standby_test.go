package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRestoreThroughAgentsWithAStandby: three voters and a standby
// (spec.voters 3), the coordinator running throughout. A restore through
// the agents, with no --target (the first agent by name), rejoins the
// three voters and leaves the standby as it was; its report names the
// voters the new cluster has. Run again, the same command does nothing
// (no second restore: every write the restored cluster acknowledged
// stays); a new restore of the restored cluster is refused without
// --again, naming the revisions it would discard.
func TestRestoreThroughAgentsWithAStandby(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	f.joinAnother() // cp-4: a standby, the cluster has its three voters
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cli := f.Client()
	if got := voterNames(t, ctx, cli); !slices.Equal(got, names) {
		t.Fatalf("voters %v before the restore, want %v and cp-4 a standby", got, names)
	}
	f.putAppKeys(ctx, cli)
	snap, before := f.snapshotAppKeys(ctx, cli)
	hosts := serveRecovery(f, append(names, "cp-4")...)
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	journal := filepath.Join(f.TempDir(), "journal.json")
	base := []string{"--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key}
	args := append(slices.Clone(base), "restore", "--from", snap, "--agents", hosts.addr("cp-4"), "--journal", journal, "--bump-revision", "1000000")
	code, out, errOut := runNicoctl(t, args...)
	if code != 0 || !strings.Contains(out, "voters cp-1, cp-2, cp-3; standbys cp-4 left as they were") {
		t.Fatalf("nicoctl restore: exit %d, want the voters cp-1..3 named and cp-4 left a standby\n%s%s", code, out, errOut)
	}
	t.Logf("nicoctl restore:\n%s", out)
	j, _, err := restore.FileJournal{Path: journal}.Load()
	if err != nil || j.Target != "cp-1" {
		t.Fatalf("journal %+v %v, want the default target cp-1", j, err)
	}
	f.WaitVoters(90*time.Second, names...)
	after := f.checkRestored(ctx)
	if after.Header.ClusterId == before.Header.ClusterId {
		t.Fatal("the restore did not make a new cluster")
	}
	f.waitOpSucceeded(ctx, j.ID)
	// Writes the restored cluster acknowledges.
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/app/restored-%d", i), "acked"); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runNicoctl(t, args...)
	if code != 0 || !strings.Contains(out, "nothing left to hand back, nothing done") {
		t.Fatalf("the same command again: exit %d, want nothing done\n%s%s", code, out, errOut)
	}
	args2 := append(slices.Clone(base), "restore", "--from", snap, "--agents", hosts.addr("cp-4"), "--journal", journal+".2")
	code, out, errOut = runNicoctl(t, args2...)
	if code != 3 || !strings.Contains(errOut, "--again") || !strings.Contains(errOut, "revisions") {
		t.Fatalf("a second restore without --again: exit %d, want refused naming the revisions it discards\n%s%s", code, out, errOut)
	}
	for i := range 10 {
		resp, err := cli.Get(ctx, fmt.Sprintf("/app/restored-%d", i))
		if err != nil || len(resp.Kvs) != 1 || resp.Header.ClusterId != after.Header.ClusterId {
			t.Fatalf("acknowledged write /app/restored-%d of the restored cluster: %v %v", i, resp, err)
		}
	}
	if got := voterNames(t, ctx, cli); !slices.Equal(got, names) {
		t.Fatalf("voters %v after the restore, want %v (cp-4 left a standby)", got, names)
	}
	if err := f.CheckVoterOrStandby("cp-4", f.Node("cp-4").Cfg.PeerURL); err != nil {
		t.Fatalf("cp-4 after the restore: %v", err)
	}
}

// voterNames are the names of the cluster's members, sorted; a learner
// fails the test.
func voterNames(t *testing.T, ctx context.Context, cli *clientv3.Client) []string {
	t.Helper()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Fatalf("learner %s in the cluster", m.Name)
		}
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestRestoreWaitsForARestartingAgent: a restore through the agents
// started while one voter's agent does not answer (restarting) stops
// nothing: it says which agent it waits for, and once that agent answers
// again it goes on and restores the cluster of three voters.
func TestRestoreWaitsForARestartingAgent(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cli := f.Client()
	f.putAppKeys(ctx, cli)
	snap, before := f.snapshotAppKeys(ctx, cli)
	hosts := serveRecovery(f, names...)
	down := hosts.addr("cp-3")
	hosts.lose("cp-3")
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	journal := filepath.Join(f.TempDir(), "journal.json")
	cmd := exec.CommandContext(ctx, nicoctlBin(t), "--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"restore", "--from", snap, "--agents", hosts.addr("cp-1"), "--journal", journal, "--bump-revision", "1000000")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), "waiting before stopping anything for cp-3") {
			// Nothing is stopped while it waits.
			for _, h := range (&restore.AgentFleet{Agents: map[string]string{"cp-1": hosts.addr("cp-1"), "cp-2": hosts.addr("cp-2")}, TLS: etcdtest.ClientTLS(t, pki.RootIdentity)}).Survey(ctx, 5*time.Second) {
				if h.Held != "" || !h.Serving || h.Data != restore.DataMember {
					t.Errorf("%s while the restore waits for cp-3: held %q, serving %v, data %s; want untouched", h.Node, h.Held, h.Serving, h.Data)
				}
			}
			hosts.serveAt("cp-3", down)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nicoctl restore: %v\n%s\n%s", err, strings.Join(seen, "\n"), errb.String())
	}
	out := strings.Join(seen, "\n")
	if !strings.Contains(out, "waiting before stopping anything for cp-3") || !strings.Contains(out, "voters cp-1, cp-2, cp-3") {
		t.Fatalf("nicoctl restore: want it to wait for cp-3, then restore the three voters\n%s\n%s", out, errb.String())
	}
	t.Logf("nicoctl restore:\n%s", out)
	f.WaitVoters(90*time.Second, names...)
	if after := f.checkRestored(ctx); after.Header.ClusterId == before.Header.ClusterId {
		t.Fatal("the restore did not make a new cluster")
	}
}

// TestRestoreRightAfterAShrink: four voters shrunk to three (one shed as
// a standby, its agent stopping), then at once a restore through the
// agents of a snapshot taken with four voters: only the three live voters
// rejoin, the shed one is left a standby, nothing fails on its agent. No
// --endpoints is given: the live cluster is asked through the members the
// agents report.
func TestRestoreRightAfterAShrink(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	f.joinAnother()
	all := append(slices.Clone(names), "cp-4")
	f.SetVoters(4)
	f.WaitVoters(120*time.Second, all...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := f.Client()
	f.putAppKeys(ctx, cli)
	snap, before := f.snapshotAppKeys(ctx, cli)
	hosts := serveRecovery(f, all...)
	f.SetVoters(3)
	kept := f.WaitVoterCount(120*time.Second, 3)
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	// No --endpoints: the live cluster is found through the agents.
	code, out, errOut := runNicoctl(t, "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"restore", "--from", snap, "--agents", hosts.addr(kept[0]), "--target", kept[0], "--journal", filepath.Join(f.TempDir(), "journal.json"), "--bump-revision", "1000000")
	if code != 0 || !strings.Contains(out, "voters "+strings.Join(kept, ", ")) {
		t.Fatalf("nicoctl restore right after the shrink to %v: exit %d\n%s%s", kept, code, out, errOut)
	}
	t.Logf("nicoctl restore:\n%s", out)
	f.WaitVoters(90*time.Second, kept...)
	if after := f.checkRestored(ctx); after.Header.ClusterId == before.Header.ClusterId {
		t.Fatal("the restore did not make a new cluster")
	}
}

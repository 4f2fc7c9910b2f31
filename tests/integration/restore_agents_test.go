package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// TestRestoreThroughAgents: the restore of TestRestoreFleetOfAgents with no
// fleet file and no shared data dir, run by the nicoctl binary: it finds
// the three control-plane agents from one of them, and each agent stops,
// fences, restores, serves and rejoins its own member. The coordinator runs
// throughout. nicoctl is killed after the first rejoin and a new run
// resumes from the journal. Callers other than the operator are refused.
func TestRestoreThroughAgents(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cli := f.Client()
	f.putAppKeys(ctx, cli)
	snap, before := f.snapshotAppKeys(ctx, cli)
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	hosts := serveRecovery(f, names...)

	checkRefusals(t, ctx, hosts.addr("cp-1"))

	// nicoctl restore --agents <cp-3's>: one agent names the others. The
	// nicoctl process is killed (SIGKILL) once the first rejoin is
	// journaled; run again, it resumes from the journal.
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	journal := filepath.Join(f.TempDir(), "journal.json")
	args := []string{"--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"restore", "--from", snap, "--agents", hosts.addr("cp-3"), "--target", "cp-2", "--journal", journal, "--bump-revision", "1000000"}
	abandon(t, ctx, hosts, journal, root)
	killAfter(t, "rejoined as a learner and was promoted", args...)
	jf := restore.FileJournal{Path: journal}
	if j, _, err := jf.Load(); err != nil || j.Step != restore.StepRejoin || j.Rejoined != 1 {
		t.Fatalf("journal after the kill: %+v %v; want step RejoinOthers, 1 rejoined", j, err)
	}
	code, out, errOut := runNicoctl(t, args...)
	if code != 0 || !strings.Contains(out, "resuming at step RejoinOthers") || !strings.Contains(out, "each member served by its agent again") {
		t.Fatalf("nicoctl restore run again: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("nicoctl restore, resumed:\n%s", out)
	f.WaitVoters(90*time.Second, names...)
	after := f.checkRestored(ctx)
	j, _, _ := jf.Load()
	if after.Header.ClusterId == before.Header.ClusterId || after.Header.ClusterId != j.NewClusterID || after.Header.Revision < j.Snapshot.Revision+1_000_000 {
		t.Fatalf("cluster %x revision %d after the restore; before %x, journal %x: want the new cluster past revision %d",
			after.Header.ClusterId, after.Header.Revision, before.Header.ClusterId, j.NewClusterID, j.Snapshot.Revision+1_000_000)
	}
	f.waitOpSucceeded(ctx, j.ID)
	agents, err := restore.DiscoverAgents(ctx, []string{hosts.addr("cp-1")}, rootTLS, 5*time.Second)
	if err != nil || len(agents) != 3 {
		t.Fatalf("DiscoverAgents = %v, %v; want the three control-plane agents", agents, err)
	}
	for _, h := range (&restore.AgentFleet{Agents: agents, TLS: rootTLS}).Survey(ctx, 5*time.Second) {
		if h.Held != "" || !h.Serving || h.ClusterID != j.NewClusterID || h.Data != restore.DataMember {
			t.Errorf("%s after the restore: held %q, serving %v, cluster %x, data %s; want its agent serving the new cluster %x", h.Node, h.Held, h.Serving, h.ClusterID, h.Data, j.NewClusterID)
		}
	}
	// nicoctl killed while it handed the hosts back: cp-1 still held by
	// the finished restore. Run again, it hands cp-1 back and does nothing
	// else (no second restore).
	if err := (&restore.AgentFleet{Agents: restore.Only(agents, "cp-1"), TLS: rootTLS, Op: j.ID}).Stop(ctx, "cp-1", nil); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runNicoctl(t, args...)
	if again, _, _ := jf.Load(); code != 0 || !strings.Contains(out, "[cp-1] handed back") || again.ID != j.ID {
		t.Fatalf("nicoctl restore after a release cut short: exit %d, journal %s (want %s)\n%s%s", code, again.ID, j.ID, out, errOut)
	}
	f.WaitVoters(90*time.Second, names...)
	// The coordinator still serves joins in the new cluster.
	f.joinAnother()
}

// checkRefusals: the recovery API refuses a node's certificate (403, named)
// and a certificate of another CA (at the handshake), for reads and for
// a stop alike; nothing is held afterwards.
func checkRefusals(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	node := etcdtest.ClientTLS(t, pki.NodeIdentity("cp-1"))
	foreign := node.Clone()
	foreign.Certificates = []tls.Certificate{etcdtest.ForeignCertificate(t, pki.RootIdentity)}
	if _, err := restore.DiscoverAgents(ctx, []string{addr}, node, 5*time.Second); !errors.Is(err, restore.ErrAgentRefused) || !contains(err, `"node:cp-1" may not call`) {
		t.Fatalf("a node certificate: %v, want refused naming it", err)
	}
	if _, err := restore.DiscoverAgents(ctx, []string{addr}, foreign, 5*time.Second); err == nil || errors.Is(err, restore.ErrAgentRefused) {
		t.Fatalf("another CA's root certificate: %v, want the handshake refused", err)
	}
	for _, c := range []*tls.Config{node, foreign} {
		af := &restore.AgentFleet{Agents: map[string]string{"cp-1": addr}, TLS: c, Op: "restore-refused"}
		if err := af.Stop(ctx, "cp-1", nil); err == nil {
			t.Fatal("a stop by a caller other than the operator was not refused")
		}
	}
	op := etcdtest.ClientTLS(t, pki.RootIdentity)
	hs := (&restore.AgentFleet{Agents: map[string]string{"cp-1": addr}, TLS: op}).Survey(ctx, 5*time.Second)
	if hs[0].Held != "" || !hs[0].Serving {
		t.Fatalf("cp-1 after the refused calls: %+v, want its agent serving, not held", hs[0])
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// killAfter runs nicoctl with args and kills it (SIGKILL) once its
// standard output shows line.
func killAfter(t *testing.T, line string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), nicoctlBin(t), args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		t.Logf("nicoctl killed %s after its start, on %q", time.Since(start).Round(time.Millisecond), line)
	}()
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), line) {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	err = cmd.Wait()
	if !strings.Contains(strings.Join(seen, "\n"), line) {
		t.Fatalf("nicoctl %q ended (%v) before %q:\n%s\n%s", args, err, line, strings.Join(seen, "\n"), errb.String())
	}
}

// abandon: a restore stopped at its first step, cp-1's host held and
// fenced by it, is abandoned with nicoctl restore --abort --agents: the
// host is handed back with its fence removed and its agent serves the old
// cluster's member again.
func abandon(t *testing.T, ctx context.Context, hosts *recoveryHosts, journal string, root etcdtest.Files) {
	t.Helper()
	op := etcdtest.ClientTLS(t, pki.RootIdentity)
	j := &restore.Journal{ID: "restore-abandoned", Kind: restore.KindRestore, Target: "cp-1", Step: restore.StepStop, StartedAt: time.Now()}
	if err := (restore.FileJournal{Path: journal}).Save(j); err != nil {
		t.Fatal(err)
	}
	af := &restore.AgentFleet{Agents: map[string]string{"cp-1": hosts.addr("cp-1")}, TLS: op, Op: j.ID}
	if err := af.Stop(ctx, "cp-1", &member.Fence{By: j.ID, At: time.Now(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if h := af.Survey(ctx, 5*time.Second)[0]; h.Held != j.ID || h.Data != restore.DataFenced || h.Serving {
		t.Fatalf("cp-1 stopped for %s: %+v", j.ID, h)
	}
	code, out, errOut := runNicoctl(t, "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"restore", "--abort", "--agents", hosts.addr("cp-1"), "--journal", journal)
	if code != 0 || !strings.Contains(out, "restore-abandoned aborted") {
		t.Fatalf("nicoctl restore --abort --agents: exit %d\n%s%s", code, out, errOut)
	}
	if h := af.Survey(ctx, 5*time.Second)[0]; h.Held != "" || h.Data != restore.DataMember || !h.Serving {
		t.Fatalf("cp-1 after the abort: %+v, want its agent serving its unfenced member", h)
	}
}

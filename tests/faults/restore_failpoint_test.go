package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/linearkv"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// restoreRig is a three-member fleet whose members the test runs
// (embedded, on 127.0.0.1 ports) until the operator stops them, its
// snapshot, and the fleet file nicoctl restore drives.
type restoreRig struct {
	t       *testing.T
	members []*etcdtest.Member
	oldID   uint64
	snap    string
	fleet   string
	root    etcdtest.Files
}

// newRestoreRig starts three members with an EtcdCluster and their Node
// records, writes keys, saves a snapshot, writes one more key (lost by
// design) and stops the members, as the operator stops the agents. The
// fleet file has nicoctl run them with the etcd binary etcd ("": embedded
// in nicoctl).
func newRestoreRig(t *testing.T, etcd string) *restoreRig {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.New(c.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Metadata.CreatedAt = time.Now().UTC()
	ec.Spec.Voters = 3
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	ml, err := st.Client().MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &restoreRig{t: t, members: c.Members, oldID: ml.Header.ClusterId}
	for _, m := range c.Members {
		n := api.NewNode(m.Name)
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		n.Spec.PeerURL, n.Spec.ClientURL = m.PeerURL, m.ClientURL
		n.Status = api.NodeStatus{Phase: api.NodeMember, MemberState: api.MemberVoter, ClusterID: api.MemberID(r.oldID)}
		if err := st.Put(ctx, store.NodeKey(m.Name), n); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := st.Client().Put(ctx, fmt.Sprintf("before/%02d", i), "kept"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	r.root = etcdtest.IssueFiles(t, dir, pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	r.snap = filepath.Join(dir, "snap.db")
	// A snapshot is of what its member applied: a linearizable read
	// through that member first makes it hold every write above.
	if _, err := etcdtest.NewClient(t, c.Endpoints()[0]).Get(ctx, "before/19"); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: c.Endpoints()[:1], TLS: etcdtest.ClientTLS(t, pki.RootIdentity), DialTimeout: 5 * time.Second}, r.snap); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, "after", "lost by design"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	var b strings.Builder
	if etcd != "" {
		fmt.Fprintf(&b, "etcd: %q\n", etcd)
	}
	fmt.Fprintf(&b, "tls: {caFile: %q, certFile: %q, keyFile: %q}\nmembers:\n", r.root.CA, r.root.Cert, r.root.Key)
	for _, m := range c.Members {
		fmt.Fprintf(&b, "  - name: %s\n    dataDir: %q\n    peerURL: %s\n    clientURL: %s\n", m.Name, m.DataDir, m.PeerURL, m.ClientURL)
		fmt.Fprintf(&b, "    tls: {trustedCAFile: %q, serverCertFile: %q, serverKeyFile: %q, peerCertFile: %q, peerKeyFile: %q}\n",
			m.TLS.TrustedCAFile, m.TLS.ServerCertFile, m.TLS.ServerKeyFile, m.TLS.PeerCertFile, m.TLS.PeerKeyFile)
	}
	r.fleet = filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(r.fleet, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *restoreRig) endpoints() []string {
	var eps []string
	for _, m := range r.members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// nicoctl runs the failpoint build's nicoctl restore, armed at point
// ("" for none), and returns its exit code.
func (r *restoreRig) nicoctl(point string) int {
	r.t.Helper()
	args := []string{"--endpoints", strings.Join(r.endpoints(), ","), "--timeout", "1s",
		"--tls.caFile", r.root.CA, "--tls.certFile", r.root.Cert, "--tls.keyFile", r.root.Key,
		"restore", "--from", r.snap, "--fleet", r.fleet}
	cmd := exec.Command(filepath.Join(binDir, "nicoctl"), args...)
	cmd.Env = os.Environ()
	if point != "" {
		cmd.Env = append(cmd.Env, failpoint.Env+"="+point)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("run nicoctl: %v", err)
	}
	r.t.Logf("nicoctl restore (failpoint %q) -> %d\n%s", point, code, out)
	return code
}

// killWithLearner runs nicoctl restore unarmed and kills it (-9) as soon
// as the new cluster has a learner: in the middle of a rejoin.
func (r *restoreRig) killWithLearner() {
	r.t.Helper()
	args := []string{"--endpoints", strings.Join(r.endpoints(), ","), "--timeout", "1s",
		"--tls.caFile", r.root.CA, "--tls.certFile", r.root.Cert, "--tls.keyFile", r.root.Key,
		"restore", "--from", r.snap, "--fleet", r.fleet}
	cmd := exec.Command(filepath.Join(binDir, "nicoctl"), args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cli := etcdtest.NewClient(r.t, r.endpoints()...)
	testwait.True(r.t, 60*time.Second, "a learner in the restored cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ml, err := cli.MemberList(ctx)
		return err == nil && slices.ContainsFunc(ml.Members, func(m *etcdserverpb.Member) bool { return m.IsLearner })
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	j := r.journal()
	r.t.Logf("nicoctl restore killed (-9) with a learner in the cluster; the journal at %s, %d rejoined\n%s", j.Step, j.Rejoined, out.String())
}

// journal is the restore's journal as nicoctl last saved it.
func (r *restoreRig) journal() *restore.Journal {
	r.t.Helper()
	j, ok, err := restore.FileJournal{Path: r.fleet + ".journal.json"}.Load()
	if err != nil || !ok {
		r.t.Fatalf("journal: %v %v", ok, err)
	}
	return j
}

// serve starts every member from its data dir, together, as their agents
// do once nicoctl handed them back.
func (r *restoreRig) serve() {
	r.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(r.members))
	for i, m := range r.members {
		rt := member.NewEmbedded()
		r.t.Cleanup(func() { _ = rt.Stop(context.Background()) })
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[i] = rt.Start(ctx, member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, TLS: m.TLS})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.t.Fatal(err)
	}
}

// learnerWatch polls the member list until ctx ends and reports every
// time it saw more than one learner or a voter missing from quorum.
func learnerWatch(ctx context.Context, cli *clientv3.Client) (wait func() []string) {
	var viol []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			ml, err := cli.MemberList(lctx)
			cancel()
			if err == nil {
				learners := 0
				for _, m := range ml.Members {
					if m.IsLearner {
						learners++
					}
				}
				if learners > 1 {
					viol = append(viol, fmt.Sprintf("%d learners at once: %v", learners, ml.Members))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() []string { <-done; return viol }
}

// TestRestoreKilledAtEveryStep: nicoctl restore is killed (its process
// exits at a failpoint, members it ran dying with it) right after each
// step of its journal, every rejoin included, and once with -9 in the
// middle of a rejoin (a learner in the cluster), and run again each time:
// it resumes from its journal and finishes. The clients' workload, started
// once the restored target first served, is linearizable across the
// kills, and every write it had acknowledged is present at the end, when
// the members are served again from their data dirs: three voters of a
// new cluster holding the snapshot's keys (not the one written after it)
// and its lineage naming the old cluster; never two learners at once.
// It runs with the members embedded in nicoctl and as etcd processes
// (the newest of NICO_ETCD_BINARIES: the data dirs are made by the
// go.mod's etcd), which get SIGTERM when nicoctl dies.
func TestRestoreKilledAtEveryStep(t *testing.T) {
	requireE2E(t)
	requireRoot(t)
	t.Run("embedded", func(t *testing.T) { restoreKilledRun(t, "nicoctl restore killed after every step", "") })
	t.Run("exec", func(t *testing.T) {
		bins := etcdtest.Binaries(t)
		restoreKilledRun(t, "nicoctl restore killed after every step, exec runtime", bins[len(bins)-1].Path)
	})
}

func restoreKilledRun(t *testing.T, name, etcd string) {
	r := newRestoreRig(t, etcd)
	started := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var h *linearkv.History
	var waitWorkload func() *linearkv.History
	var waitWatch func() []string
	// kill runs nicoctl armed at point and checks that it died there: the
	// journal is at the step after the one the point ends.
	kill := func(point string, next restore.Step) {
		t.Helper()
		if code := r.nicoctl(point); code != failpoint.ExitCode {
			t.Fatalf("nicoctl restore exited %d, want %d at %s", code, failpoint.ExitCode, point)
		}
		if j := r.journal(); j.Step != next {
			t.Fatalf("killed at %s, the journal is at step %s, want %s", point, j.Step, next)
		}
	}
	kill(failpoint.RestoreAfterStop, restore.StepRestore)
	kill(failpoint.RestoreAfterRestore, restore.StepStart)
	kill(failpoint.RestoreAfterStart, restore.StepRecord)
	// The restore point is behind: the new cluster has served.
	h, waitWorkload = linearkv.Run(ctx, func() *clientv3.Client { return etcdtest.NewClient(t, r.endpoints()...) }, 3, 1, 0)
	waitWatch = learnerWatch(ctx, etcdtest.NewClient(t, r.endpoints()...))
	kill(failpoint.RestoreAfterRecord, restore.StepRejoin)
	// In the middle of a step, not after it: -9 while a learner joins.
	r.killWithLearner()
	for i := 0; r.journal().Step == restore.StepRejoin; i++ {
		before := r.journal().Rejoined
		if i > len(r.members) {
			t.Fatalf("still rejoining after %d runs: %+v", i, r.journal())
		}
		if code := r.nicoctl(failpoint.RestoreAfterRejoin); code != failpoint.ExitCode {
			t.Fatalf("nicoctl restore exited %d, want %d at %s", code, failpoint.ExitCode, failpoint.RestoreAfterRejoin)
		}
		if j := r.journal(); j.Step == restore.StepRejoin && j.Rejoined != before+1 {
			t.Fatalf("killed after a rejoin, the journal counts %d rejoined, was %d", j.Rejoined, before)
		}
	}
	if j := r.journal(); j.Step != restore.StepFinish || j.Rejoined != len(r.members)-1 {
		t.Fatalf("after the rejoins the journal is at %s with %d rejoined", j.Step, j.Rejoined)
	}
	if code := r.nicoctl(""); code != 0 {
		t.Fatalf("the last nicoctl restore exited %d", code)
	}
	converged := time.Since(started)
	r.serve()
	cli := etcdtest.NewClient(t, r.endpoints()...)
	testwait.True(t, 30*time.Second, "the served members answering", func() bool {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cli.Put(wctx, "probe", "x")
		return err == nil
	})
	from := h.Acked()
	testwait.True(t, 30*time.Second, "the clients writing to the served members", func() bool { return h.Acked() >= from+10 })
	// The same command again, as a failed run's message advises: the
	// restore is done and the cluster it made has acknowledged writes
	// since, so it is refused (no --again) and changes nothing.
	var viol []string
	if code := r.nicoctl(""); code != 3 {
		viol = append(viol, fmt.Sprintf("nicoctl restore run again after it was done exited %d, want 3 (refused: the cluster was restored already)", code))
	}
	for _, m := range r.members {
		if f, ok, err := member.ReadFence(m.DataDir); ok || err != nil {
			viol = append(viol, fmt.Sprintf("%s's data dir fenced by the run again: %+v %v", m.Name, f, err))
		}
	}
	from = h.Acked()
	testwait.True(t, 30*time.Second, "the clients writing after the run again", func() bool { return h.Acked() >= from+10 })
	stop()
	h = waitWorkload()
	viol = append(viol, waitWatch()...)
	v := linearkv.Check(t, cli, h, filepath.Join(reportDir(), strings.NewReplacer(" ", "-", ",", "").Replace(name)+".html"))

	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ml, err := cli.MemberList(rctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Members {
		if m.IsLearner || m.Name == "" {
			viol = append(viol, fmt.Sprintf("member %s is not a started voter", m.Name))
		}
	}
	if len(ml.Members) != 3 || ml.Header.ClusterId == r.oldID {
		viol = append(viol, fmt.Sprintf("members %v of cluster %x, want three voters of a new cluster (not %x)", ml.Members, ml.Header.ClusterId, r.oldID))
	}
	for key, want := range map[string]int64{"before/": 20, "after": 0} {
		resp, err := cli.Get(rctx, store.DefaultPrefix+key, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != want {
			viol = append(viol, fmt.Sprintf("%s: %v keys (%v), want %d", key, resp, err, want))
		}
	}
	st, err := store.New(etcdtest.NewClient(t, r.endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	lin := &api.ClusterLineage{}
	if err := st.Get(rctx, store.ClusterLineageKey, lin); err != nil || !lin.Has(api.MemberID(r.oldID)) {
		viol = append(viol, fmt.Sprintf("lineage %+v (%v) lacks the old cluster %x", lin.Status, err, r.oldID))
	}
	if kv, err := st.GetKV(rctx, store.ActiveOpKey); !errors.Is(err, store.ErrNotFound) {
		viol = append(viol, fmt.Sprintf("the one-change slot is still held: %v %v", kv, err))
	}

	record(row{Scenario: name, Violations: len(viol), Lost: len(v.Lost), Verdict: string(v.Linearizable), Stall: v.Stall, Converge: converged, Ops: v.Ops})
	t.Logf("%s: %d ops (%d failed or unknown), linearizable %s, %d lost, longest stall %s, restore done in %s",
		name, v.Ops, v.Failed, v.Linearizable, len(v.Lost), v.Stall.Round(time.Millisecond), converged.Round(time.Millisecond))
	if v.Ops == 0 {
		t.Error("the clients recorded no operation")
	}
	if v.Linearizable != "Ok" {
		t.Errorf("history is %s, not linearizable", v.Linearizable)
	}
	if len(v.Lost) > 0 {
		t.Errorf("%d acknowledged writes lost: %v", len(v.Lost), v.Lost[:min(len(v.Lost), 10)])
	}
	if len(viol) > 0 {
		t.Errorf("invariants breached:\n%s", strings.Join(viol, "\n"))
	}
}

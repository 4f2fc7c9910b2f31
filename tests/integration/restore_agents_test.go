package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// errKilled stands for nicoctl killed after a step: its process is gone,
// the journal file is what is left.
var errKilled = errors.New("nicoctl killed")

// TestRestoreThroughAgents: the restore of TestRestoreFleetOfAgents with no
// fleet file and no shared data dir: nicoctl finds the three control-plane
// agents from one of them, and each agent stops, fences, restores, serves
// and rejoins its own member. The coordinator runs throughout. nicoctl is
// killed after the first rejoin and a new run resumes from the journal.
// Callers other than the operator are refused.
func TestRestoreThroughAgents(t *testing.T) {
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(3)
	f.StartCoordinator("c-1")
	for _, n := range []string{"cp-2", "cp-3"} {
		f.Start(f.AgentConfig(n, false))
	}
	names := []string{"cp-1", "cp-2", "cp-3"}
	f.WaitVoters(90*time.Second, names...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	snap := filepath.Join(f.TempDir(), "snap.db")
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: f.Endpoints()[:1], TLS: rootTLS, DialTimeout: 5 * time.Second}, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/app/after", "lost by design"); err != nil {
		t.Fatal(err)
	}
	hosts := serveRecovery(f, names...)

	checkRefusals(t, ctx, hosts.addr("cp-1"))

	// nicoctl restore --agents <cp-3's>: one agent names the others.
	agents, err := restore.DiscoverAgents(ctx, []string{hosts.addr("cp-3")}, rootTLS, 5*time.Second)
	if err != nil || len(agents) != 3 {
		t.Fatalf("DiscoverAgents = %v, %v; want the three control-plane agents", agents, err)
	}
	live := etcdtest.NewClient(t, f.Endpoints()...)
	j, err := restore.Prepare(ctx, restore.Request{Snapshot: snap, Target: "cp-2", Members: restore.AgentNames(agents), Live: live, Prefix: store.DefaultPrefix, BumpRevision: 1_000_000, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	jf := restore.FileJournal{Path: filepath.Join(f.TempDir(), "journal.json")}
	if err := jf.Save(j); err != nil {
		t.Fatal(err)
	}
	run := func(afterStep func(restore.Step) error) (*restore.AgentFleet, error) {
		j, ok, err := jf.Load()
		if err != nil || !ok {
			t.Fatalf("journal: %v %v", ok, err)
		}
		af := &restore.AgentFleet{Agents: agents, TLS: rootTLS, ClientTLS: rootTLS, Op: j.ID, ClusterToken: "nico-" + j.ID}
		r := &restore.Runner{Fleet: af, Journal: jf, Prefix: store.DefaultPrefix, Log: f.Log, AfterStep: afterStep}
		return af, r.Run(ctx, j)
	}
	rejoins := 0
	if _, err := run(func(s restore.Step) error {
		if s == restore.StepRejoin {
			if rejoins++; rejoins == 1 {
				return errKilled
			}
		}
		return nil
	}); !errors.Is(err, errKilled) {
		t.Fatalf("first run: %v, want it killed after the first rejoin", err)
	}
	if j, _, _ := jf.Load(); j.Step != restore.StepRejoin || j.Rejoined != 1 {
		t.Fatalf("journal after the kill: step %s, %d rejoined; want RejoinOthers, 1", j.Step, j.Rejoined)
	}
	af, err := run(nil)
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if err := af.Release(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}

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
	j, _, _ = jf.Load()
	if after.Header.ClusterId == before.Header.ClusterId || after.Header.ClusterId != j.NewClusterID || after.Header.Revision < j.Snapshot.Revision+1_000_000 {
		t.Fatalf("cluster %x revision %d after the restore; before %x, journal %x: want the new cluster past revision %d",
			after.Header.ClusterId, after.Header.Revision, before.Header.ClusterId, j.NewClusterID, j.Snapshot.Revision+1_000_000)
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
	for _, h := range (&restore.AgentFleet{Agents: agents, TLS: rootTLS}).Survey(ctx, 5*time.Second) {
		if h.Held != "" || !h.Serving || h.ClusterID != j.NewClusterID || h.Data != restore.DataMember {
			t.Errorf("%s after the restore: held %q, serving %v, cluster %x, data %s; want its agent serving the new cluster %x", h.Node, h.Held, h.Serving, h.ClusterID, h.Data, j.NewClusterID)
		}
	}
	// The coordinator still serves joins in the new cluster.
	f.Start(f.AgentConfig("cp-4", false))
	testwait.For(t, 90*time.Second, "cp-4 joined as a voter or standby", func() (bool, string) {
		err := f.CheckVoterOrStandby("cp-4", f.Node("cp-4").Cfg.PeerURL)
		return err == nil, fmt.Sprint(err)
	})
}

// checkRefusals: the recovery API refuses a node's certificate (403, named)
// and a certificate of another CA (at the handshake), for reads and for
// a stop alike; nothing is held afterwards.
func checkRefusals(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	node := etcdtest.ClientTLS(t, pki.NodeIdentity("cp-1"))
	other, err := pki.NewCA("another CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.Issue(pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreign := node.Clone()
	foreign.Certificates = []tls.Certificate{pair}
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

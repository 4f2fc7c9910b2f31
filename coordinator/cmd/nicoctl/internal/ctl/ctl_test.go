package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"gopkg.in/yaml.v3"
)

// result is one nicoctl run.
type result struct {
	code           int
	stdout, stderr string
}

// run runs nicoctl against endpoints with args, as root (a certificate
// from etcdtest's CA).
func run(t *testing.T, endpoints []string, args ...string) result {
	t.Helper()
	var out bytes.Buffer
	return runTo(t, &out, endpoints, args...)
}

// runTo runs nicoctl with its standard output written to stdout.
func runTo(t *testing.T, stdout io.Writer, endpoints []string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	stdout = io.MultiWriter(stdout, &out)
	if endpoints != nil {
		args = append([]string{"--endpoints", strings.Join(endpoints, ",")}, args...)
	}
	root := etcdtest.IssueFiles(t, t.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	args = append([]string{"--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key}, args...)
	code := Main(args, stdout, &errb)
	t.Logf("nicoctl %s -> %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return result{code, out.String(), errb.String()}
}

func (r result) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newStore(t *testing.T, c *etcdtest.Cluster) *store.Store {
	t.Helper()
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// registerNode registers a control-plane node for member m.
func registerNode(t *testing.T, st *store.Store, name string, m *etcdtest.Member) {
	t.Helper()
	n := api.NewNode(name)
	n.Metadata.CreatedAt = time.Now().Add(-3 * time.Minute)
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.PeerURL, n.Spec.ClientURL = m.PeerURL, m.ClientURL
	n.Status = api.NodeStatus{Phase: api.NodeMember, MemberState: api.MemberVoter, MemberID: 0xabc, Message: "running  etcd",
		DataDir: &api.DataDirStatus{SizeBytes: 256 << 20, Full: true}}
	if err := st.Put(testCtx(t), store.NodeKey(name), n); err != nil {
		t.Fatal(err)
	}
}

// seed writes a fleet around a one-member cluster: cp-1 (its member, alive),
// w-1 (a worker, dead), an active removal operation with history, a pending
// join and a pending removal.
func seed(t *testing.T, c *etcdtest.Cluster, st *store.Store) {
	ctx := testCtx(t)
	registerNode(t, st, "cp-1", c.Members[0])
	w := api.NewNode("w-1")
	w.Metadata.CreatedAt = time.Now().Add(-50 * time.Hour)
	w.Spec.Roles = []api.Role{api.RoleWorker}
	w.Status.Phase = api.NodeRegistered
	if err := st.Put(ctx, store.NodeKey("w-1"), w); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.HeartbeatKey("cp-1"), "1"); err != nil {
		t.Fatal(err)
	}
	op := api.NewOperation("20260101T000000.000000-remove-cp-9")
	op.Metadata.CreatedAt = time.Now().Add(-5 * time.Minute)
	op.Spec = api.OperationSpec{Type: api.OpRemove, Node: "cp-9", MemberID: 0x99, Request: "cp-9", StartedBy: "coord-1"}
	op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepRemoveMember, StepSince: time.Now()}
	op.Record(time.Now(), "coord-1", "started removal of cp-9")
	if err := st.Put(ctx, store.OpKey(op.Metadata.Name), op); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.ActiveOpKey, op.Metadata.Name); err != nil {
		t.Fatal(err)
	}
	j := api.NewJoinRequest("cp-8")
	j.Spec.Node = "cp-8"
	if err := st.Put(ctx, store.JoinKey("cp-8"), j); err != nil {
		t.Fatal(err)
	}
	r := api.NewRemoveRequest("cp-9")
	r.Status.Phase = api.RemoveRunning
	if err := st.Put(ctx, store.RemovalKey("cp-9"), r); err != nil {
		t.Fatal(err)
	}
}

func TestGetAndStatus(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	seed(t, c, st)
	eps := c.Endpoints()
	m := c.Members[0]

	t.Run("members table", func(t *testing.T) {
		r := run(t, eps, "get", "members")
		r.want(t, 0, []string{"ID", "NAME", "STATUS", "HEALTH", "LEADER", "PEER URL", "CLIENT URL", "RAFT INDEX", "PROGRESS", "ETA"}, nil)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 {
			t.Fatalf("want a header and one row, got %q", lines)
		}
		for _, f := range []string{"cp-1", "voter", "healthy", "*", m.PeerURL, m.ClientURL} {
			if !strings.Contains(lines[1], f) {
				t.Errorf("row %q lacks %q", lines[1], f)
			}
		}
	})
	t.Run("members json and yaml", func(t *testing.T) {
		var views []MemberView
		r := run(t, eps, "get", "members", "-o", "json")
		r.want(t, 0, nil, nil)
		if err := json.Unmarshal([]byte(r.stdout), &views); err != nil {
			t.Fatal(err)
		}
		if len(views) != 1 || views[0].Node != "cp-1" || views[0].Name != "m0" || !views[0].Leader || !views[0].Healthy || views[0].Status != StatusVoter || views[0].RaftIndex == 0 {
			t.Fatalf("views = %+v", views)
		}
		var y []map[string]any
		r = run(t, eps, "get", "members", "-o", "yaml")
		if err := yaml.Unmarshal([]byte(r.stdout), &y); err != nil {
			t.Fatal(err)
		}
		if len(y) != 1 || y[0]["node"] != "cp-1" || y[0]["peerURLs"].([]any)[0] != m.PeerURL || y[0]["id"] != views[0].ID.String() {
			t.Fatalf("yaml = %v", y)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		r := run(t, eps, "get", "nodes")
		r.want(t, 0, []string{"NAME", "ROLES", "PHASE", "MEMBER", "STATE", "ALIVE", "LIVENESS", "SINCE", "DATADIR", "AGE", "MESSAGE"}, nil)
		rows := rowsByName(r.stdout)
		if f := rows["cp-1"]; strings.Join(f, " ") != "cp-1 controlPlane Member 0000000000000abc voter yes - - FULL:0B/256.0MiB 3m running etcd" {
			t.Errorf("cp-1 row = %q", f)
		}
		if f := rows["w-1"]; strings.Join(f, " ") != "w-1 worker Registered - - no - - - 2d -" {
			t.Errorf("w-1 row = %q", f)
		}
		var nodes []api.Node
		r = run(t, eps, "get", "nodes", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Kind != api.KindNode || nodes[0].Spec.PeerURL != m.PeerURL || nodes[1].Metadata.Name != "w-1" {
			t.Fatalf("nodes = %+v", nodes)
		}
		r = run(t, eps, "get", "nodes", "-o", "yaml")
		var y []struct {
			APIVersion string `yaml:"apiVersion"`
			Metadata   struct{ Name string }
			Status     struct {
				MemberID string `yaml:"memberID"`
			}
		}
		if err := yaml.Unmarshal([]byte(r.stdout), &y); err != nil {
			t.Fatal(err)
		}
		if len(y) != 2 || y[0].APIVersion != api.Version || y[0].Metadata.Name != "cp-1" || y[0].Status.MemberID != "0000000000000abc" {
			t.Fatalf("yaml = %+v\n%s", y, r.stdout)
		}
	})
	t.Run("ops", func(t *testing.T) {
		name := "20260101T000000.000000-remove-cp-9"
		r := run(t, eps, "get", "ops")
		r.want(t, 0, []string{"NAME", "TYPE", "NODE", "PHASE", "STEP", "AGE", "MESSAGE"}, nil)
		if f := rowsByName(r.stdout)[name]; len(f) < 6 || strings.Join(f[:6], " ") != name+" Remove cp-9 Running RemoveMember 5m" {
			t.Errorf("op row = %q", f)
		}
		run(t, eps, "get", "ops", name).want(t, 0, []string{"Name:", name, "Step:", "RemoveMember", "History:", "started removal of cp-9", "coord-1"}, nil)
		var op api.Operation
		r = run(t, eps, "get", "ops", name, "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &op); err != nil || len(op.Status.History) != 1 {
			t.Fatalf("op = %+v, %v", op, err)
		}
		run(t, eps, "get", "ops", "nope").want(t, ExitNotFound, nil, []string{"no operation named nope"})
	})
	t.Run("status", func(t *testing.T) {
		r := run(t, eps, "status")
		r.want(t, 0, []string{"Cluster ID:", "Coordinator leader:", "none", "etcd leader:", "cp-1 (member", "1/1 healthy, quorum 1 (ok)",
			"Active operation:", "remove-cp-9 (Remove cp-9, Running at RemoveMember)", "Pending joins:", "cp-8 (Pending)", "Pending removals:", "cp-9 (Running)"}, nil)
		var v StatusView
		r = run(t, eps, "status", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatal(err)
		}
		if v.ClusterID == 0 || v.EtcdLeader != "cp-1" || v.Voters != 1 || !v.QuorumOK || v.ActiveOperation == nil || len(v.PendingJoins) != 1 || len(v.PendingRemovals) != 1 {
			t.Fatalf("status = %+v", v)
		}
	})
	t.Run("settings from env and file", func(t *testing.T) {
		t.Setenv("NICO_ENDPOINTS", strings.Join(eps, ","))
		t.Setenv("NICO_OUTPUT", "json")
		r := run(t, nil, "get", "nodes")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "[") {
			t.Fatalf("env settings ignored: %+v", r)
		}
		// A flag wins over the environment.
		if r := run(t, nil, "get", "nodes", "-o", "table"); !strings.HasPrefix(r.stdout, "NAME") {
			t.Fatalf("flag did not win: %q", r.stdout)
		}
		t.Setenv("NICO_ENDPOINTS", "")
		t.Setenv("NICO_OUTPUT", "")
		cfg := filepath.Join(t.TempDir(), "nicoctl.yaml")
		body := "endpoints: [" + strings.Join(eps, ",") + "]\noutput: yaml\ntimeout: 3s\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		run(t, nil, "--config", cfg, "get", "nodes").want(t, 0, []string{"apiVersion: " + api.Version}, nil)
		// Another prefix is another, here empty, fleet.
		if r := run(t, eps, "--store.prefix", "/other/", "get", "nodes", "-o", "json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Fatalf("other prefix: %+v", r)
		}
	})
}

// rowsByName splits table rows into fields, keyed by their first field.
func rowsByName(out string) map[string][]string {
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	return rows
}

func TestUnreachable(t *testing.T) {
	eps := []string{"https://127.0.0.1:1"}
	for _, args := range [][]string{
		{"get", "members"}, {"get", "nodes"}, {"get", "ops"}, {"get", "ops", "x"}, {"status"}, {"remove", "node", "cp-1"},
	} {
		r := run(t, eps, append(args, "--timeout", "500ms")...)
		r.want(t, ExitUsage, nil, []string{"cannot reach etcd at https://127.0.0.1:1"})
	}
}

func TestUsage(t *testing.T) {
	run(t, nil, "--help").want(t, 0, []string{"Exit codes:", "3  refused as unsafe", "4  not found"}, nil)
	run(t, nil, "get", "members", "-o", "xml").want(t, ExitUsage, nil, []string{"output", `"xml" is not accepted; use one of table, json, yaml`})
	run(t, nil, "status", "--timeout", "soon").want(t, ExitUsage, nil, []string{"soon"})
	run(t, nil, "get", "things").want(t, ExitUsage, nil, []string{`unknown command "things"`})
	run(t, nil, "get").want(t, ExitUsage, nil, []string{"members, nodes, ops, rollouts, etcdcluster, clusters or kubeconfig"})
	run(t, nil, "remove", "node").want(t, ExitUsage, nil, []string{"accepts 1 arg"})
}

package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/agent/joinendpoint"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/pkg/token"
)

// TestJoinWithToken: on a cluster with mutual TLS and etcd authentication,
// a worker that holds nothing but a token file gets its certificate from
// the bootstrap machine's join endpoint, registers as node:<name> and
// becomes ready; a worker with a revoked token is refused, and its agent
// stops with an error that says the token was revoked and never shows its
// secret.
func TestJoinWithToken(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	listen, reg := bootstrapWithJoinEndpoint(t, f)
	ctx := t.Context()
	// An operator's tokens (nicoctl token create / revoke).
	worker, _, err := reg.Create(ctx, token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour, Description: "w-1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	revoked, _, err := reg.Create(ctx, token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Revoke(ctx, revoked.ID, time.Now()); err != nil {
		t.Fatal(err)
	}

	w := startJoiner(f, "w-1", api.RoleWorker, tokenFile(t, f, worker), listen)
	testwait.For(t, 60*time.Second, "w-1 ready", func() (bool, string) { return w.Agent.Healthy(), "not healthy" })
	waitObj[api.Node](f, 10*time.Second, store.NodeKey("w-1"), "w-1 registered", func(n *api.Node) bool { return n.Status.Phase == api.NodeRegistered })
	b, err := os.ReadFile(w.Cfg.PKI.Dir.Cert(pki.NodeLeaf))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pki.ParseCert(b); err != nil || c.Subject.CommonName != "node:w-1" {
		t.Fatalf("w-1's certificate: %v %v", c, err)
	}
	if tok, err := reg.Get(ctx, worker.ID); err != nil || tok.Status.Uses != 1 || tok.Status.LastUsedBy != "w-1" {
		t.Fatalf("token after the join: %+v %v", tok, err)
	}

	r := startJoiner(f, "w-2", api.RoleWorker, tokenFile(t, f, revoked), listen)
	select {
	case err := <-r.Done:
		r.Done <- err
		if !errors.Is(err, token.ErrRevoked) || !strings.Contains(err.Error(), "token "+revoked.ID+" was revoked") || strings.Contains(err.Error(), revoked.Secret) {
			t.Fatalf("w-2 with a revoked token: %v", err)
		}
		t.Logf("w-2 refused: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("w-2 with a revoked token did not stop")
	}
	if _, err := os.Stat(r.Cfg.PKI.Dir.CACert()); err == nil {
		t.Fatal("w-2 got a CA certificate")
	}
	if resp, err := f.Client().Get(ctx, store.DefaultPrefix+store.NodeKey("w-2")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("w-2 registered: %v %v", resp, err)
	}
}

// TestJoinControlPlaneWithToken: a control-plane machine holding only a
// token that allows the role gets the control-plane bundle through the join
// endpoint (CA key, secrets key, coordinator and root identities), issues
// its own etcd certificates with it and becomes a voter; it then serves a
// join endpoint of its own.
func TestJoinControlPlaneWithToken(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	listen, reg := bootstrapWithJoinEndpoint(t, f)
	f.StartCoordinator("c-1")
	tok, _, err := reg.Create(t.Context(), token.Spec{Roles: []api.Role{api.RoleControlPlane}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cp2 := startJoiner(f, "cp-2", api.RoleControlPlane, tokenFile(t, f, tok), listen)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2")
	testwait.For(t, 30*time.Second, "cp-2 ready", func() (bool, string) { return cp2.Agent.Healthy(), "not healthy" })
	d := cp2.Cfg.PKI.Dir
	for _, file := range []string{d.CAKey(), d.SecretsKey(), d.Cert(pki.CoordinatorLeaf), d.Cert(pki.RootLeaf), d.Cert(pki.EtcdPeerLeaf), d.Cert(pki.EtcdServerLeaf)} {
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("cp-2 %s: %v", file, err)
		}
	}
	// cp-2 serves the join endpoint too, with the keys it received.
	listen2 := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	je := joinendpoint.New(joinendpoint.Config{
		Name: "cp-2", Dir: d, Listen: listen2, Endpoints: []string{cp2.Cfg.ClientURL}, Prefix: cp2.Cfg.Prefix, Poll: 100 * time.Millisecond,
	}, f.Log.With("test-node", "cp-2"))
	runEndpoint(t, je)
	wt, _, err := reg.Create(t.Context(), token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w := startJoiner(f, "w-1", api.RoleWorker, tokenFile(t, f, wt), listen2)
	testwait.For(t, 60*time.Second, "w-1 ready through cp-2", func() (bool, string) { return w.Agent.Healthy(), "not healthy" })
}

// bootstrapWithJoinEndpoint starts the bootstrap machine cp-1 on TLS with
// its join endpoint, its tokenFile holding a join token, and returns the
// endpoint's address and a token registry as nicoctl would use it (root,
// cp-1's secrets key).
func bootstrapWithJoinEndpoint(t *testing.T, f *fleet) (string, *token.Registry) {
	t.Helper()
	boot, _ := token.Generate()
	bootFile := tokenFile(t, f, boot)
	cp := tlsAgentConfig(f, "cp-1", true)
	// The bootstrap machine's pki.dir: the harness gives it the CA; the
	// secrets key is what its bootstrap (makeCA) would have made.
	key, _ := secretbox.NewKey()
	if err := pki.WriteFile(cp.PKI.Dir.SecretsKey(), key); err != nil {
		t.Fatal(err)
	}
	f.Start(cp)
	f.WaitVoters(60*time.Second, "cp-1")
	listen := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	runEndpoint(t, joinendpoint.New(joinendpoint.Config{
		Name: "cp-1", Dir: cp.PKI.Dir, Listen: listen, Endpoints: []string{cp.ClientURL},
		Prefix: cp.Prefix, TokenFile: bootFile, Bootstrap: true, Poll: 100 * time.Millisecond,
	}, f.Log.With("test-node", "cp-1")))
	st, err := store.New(etcdtest.NewClient(t, cp.ClientURL), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(key)
	return listen, token.NewRegistry(secrets.New(st, box))
}

// runEndpoint runs je until the test ends.
func runEndpoint(t *testing.T, je *joinendpoint.Endpoint) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("join endpoint: %v", err)
		}
	})
}

// tlsAgentConfig is f.agentConfig on https URLs with a pki.dir, whatever
// etcdtest.TLSDefault says.
func tlsAgentConfig(f *fleet, name string, bootstrap bool) agent.Config {
	cfg := f.AgentConfig(name, bootstrap)
	cfg.PeerURL, cfg.ClientURL = etcdtest.URLsFor(f.t, true)
	cfg.Endpoints = slicesWithout(f.Endpoints(), "http://")
	cfg.PKI.Dir = pki.Dir(filepath.Join(f.TempDir(), "pki"))
	return cfg
}

func slicesWithout(eps []string, prefix string) []string {
	var out []string
	for _, e := range eps {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// tokenFile writes tok into a 0600 file.
func tokenFile(t *testing.T, f *fleet, tok token.Token) string {
	t.Helper()
	p := filepath.Join(f.TempDir(), "token")
	if err := os.WriteFile(p, []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startJoiner runs an agent whose pki.dir is empty, as on a new machine:
// it has only its token file and the join endpoint's address (the
// harness's provisioning is skipped).
func startJoiner(f *fleet, name string, role api.Role, tokenFile, endpoint string) *node {
	cfg := tlsAgentConfig(f, name, false)
	cfg.Roles = []api.Role{role}
	return f.Run(cfg, f.NewRuntime(), func(n *node) {
		if role == api.RoleControlPlane {
			n.Notify.OnReady = func() error { return f.CheckVoter(cfg.PeerURL) }
		}
		n.Agent.ObtainCerts = joinendpoint.Obtain(joinendpoint.ClientConfig{Name: name, Roles: cfg.Roles, Endpoints: []string{endpoint}, TokenFile: tokenFile}, f.Log.With("test-node", name))
	})
}

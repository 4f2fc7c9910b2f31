package integration

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/pkg/token"
	"github.com/homystack/nico/tests/fleetkit"
)

// TestNoSecretsInLogs runs a cluster's life with every secret nico makes:
// a bootstrap agent makes the CA, the secrets key and its certificates and
// turns etcd's auth on; a join token is created; a machine with a wrong
// secret is refused; a machine with the token joins through the join
// endpoint and its agent registers. Then it searches every log line (at
// debug level, text and JSON) and every error for each secret: the token's
// secret, every private key (PEM and its base64 body), the secrets key and
// the gossip secret (raw, hex, base64).
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	logs := &logging.Buffer{}
	text, err := logging.New(logs, "debug", "text")
	if err != nil {
		t.Fatal(err)
	}
	jsonLog, err := logging.New(logs, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	var errs []error // every error the run returned: they must not leak either
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The bootstrap machine makes the CA, secrets.key and its certificates.
	dir := t.TempDir()
	peer, client := etcdtest.URLsFor(t, true)
	cpDir := pki.Dir(filepath.Join(dir, "cp-1", "pki"))
	cp := agent.Config{
		Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true,
		DataDir: filepath.Join(dir, "cp-1", "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "nico-secrets", DialTimeout: 3 * time.Second, Prefix: store.DefaultPrefix,
		HeartbeatTTL: 3 * time.Second, RetryInterval: 500 * time.Millisecond, Version: "test",
		PKI: agent.PKIConfig{Dir: cpDir},
	}
	stopCP := runAgent(t, cp, text.With("test-node", "cp-1"))
	defer stopCP()

	var st *store.Store
	testwait.For(t, 60*time.Second, "the bootstrap node registered", func() (bool, string) {
		rootTLS, err := pki.ClientTLS(cpDir.CACert(), cpDir.Cert(pki.RootLeaf), cpDir.Key(pki.RootLeaf))
		if err != nil {
			return false, "no root certificate yet: " + err.Error()
		}
		cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{client}, DialTimeout: 3 * time.Second, TLS: rootTLS})
		if err != nil {
			return false, err.Error()
		}
		s, err := store.New(cli, store.DefaultPrefix)
		if err != nil {
			cli.Close()
			return false, err.Error()
		}
		n := api.NewNode("")
		if err := s.Get(ctx, store.NodeKey("cp-1"), n); err != nil || n.Status.Phase != api.NodeMember {
			cli.Close()
			return false, fmt.Sprintf("phase %q, %v", n.Status.Phase, err)
		}
		st = s
		return true, ""
	})
	defer st.Client().Close()

	// A token, sealed in the store with the bootstrap's secrets.key.
	box, err := secretbox.Load(cpDir.SecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	reg := token.NewRegistry(secrets.New(st, box))
	tok, _, err := reg.Create(ctx, token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour, Description: "secrets test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	text.Info("token created", "token", tok) // as nicoctl would log it: redacted
	jsonLog.Info("token created", "token", tok)

	// The join endpoint, signing with the bootstrap's CA.
	ca, err := pki.LoadCA(cpDir.CACert(), cpDir.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	gossipSecret := []byte("gossip-secret-" + tok.Secret[:8])
	srv, err := enroll.NewServer(enroll.ServerConfig{
		Tokens: reg, Signer: ca, CAPEM: ca.CertPEM,
		EnsureIdentityRoles: rbac.IdentityEnsurer(st.Client().Auth, store.DefaultPrefix),
		Cluster: func(context.Context) (enroll.Cluster, error) {
			return enroll.Cluster{Endpoints: []string{client}, GossipSecret: gossipSecret, GossipGeneration: 1}, nil
		},
		Log: jsonLog.With("component", "join-endpoint"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := enroll.ServerCert(ca, "cp-1", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, cert) }()
	defer func() { stopServe(); <-served }()

	// A machine with the wrong secret is refused; one with the token joins.
	wrong := tok
	wrong.Secret = strings.Repeat("x", len(tok.Secret))
	_, err = enroll.Obtain(ctx, enroll.ClientConfig{Endpoints: []string{ln.Addr().String()}, Token: wrong, Name: "w0", Roles: []api.Role{api.RoleWorker}, Log: text}, pki.Dir(filepath.Join(dir, "w0", "pki")))
	if err == nil {
		t.Fatal("a wrong secret joined")
	}
	errs = append(errs, err)
	wDir := pki.Dir(filepath.Join(dir, "w1", "pki"))
	if _, err := enroll.Obtain(ctx, enroll.ClientConfig{Endpoints: []string{ln.Addr().String()}, Token: tok, Name: "w1", Roles: []api.Role{api.RoleWorker}, Log: text}, wDir); err != nil {
		t.Fatalf("join: %v", err)
	}
	w := agent.Config{
		Name: "w1", Roles: []api.Role{api.RoleWorker}, DataDir: filepath.Join(dir, "w1", "etcd"),
		Endpoints: []string{client}, DialTimeout: 3 * time.Second, Prefix: store.DefaultPrefix,
		HeartbeatTTL: 3 * time.Second, RetryInterval: 500 * time.Millisecond, Version: "test",
		PKI: agent.PKIConfig{Dir: wDir},
	}
	stopW := runAgent(t, w, jsonLog.With("test-node", "w1"))
	testwait.For(t, 30*time.Second, "the joined worker registered", func() (bool, string) {
		n := api.NewNode("")
		err := st.Get(ctx, store.NodeKey("w1"), n)
		return err == nil && n.Status.Phase == api.NodeRegistered, fmt.Sprintf("phase %q, %v", n.Status.Phase, err)
	})
	if err := stopW(); err != nil {
		errs = append(errs, err)
	}
	if err := stopCP(); err != nil {
		errs = append(errs, err)
	}

	// Every secret the run made, in every form it could be printed.
	type secret struct{ what, value string }
	var made []secret
	add := func(what string, b []byte) {
		made = append(made, secret{what, string(b)}, secret{what + " (hex)", hex.EncodeToString(b)},
			secret{what + " (base64)", base64.StdEncoding.EncodeToString(b)}, secret{what + " (base64url)", base64.RawURLEncoding.EncodeToString(b)})
	}
	made = append(made, secret{"token secret", tok.Secret}, secret{"token", tok.Reveal()}, secret{"PEM private key marker", "PRIVATE KEY"})
	sk, err := os.ReadFile(cpDir.SecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	add("secrets key", sk)
	add("gossip secret", gossipSecret)
	for _, d := range []pki.Dir{cpDir, wDir} {
		keys, _ := filepath.Glob(filepath.Join(string(d), "*.key"))
		if len(keys) == 0 {
			t.Fatalf("no keys in %s", d)
		}
		for _, k := range keys {
			if k == d.SecretsKey() {
				continue
			}
			pemBytes, err := os.ReadFile(k)
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, secret{k, string(pemBytes)}, secret{k + " (PEM body line)", pemBodyLine(pemBytes)})
		}
	}
	out := logs.String()
	for _, want := range []string{"etcd authentication enabled", "node ready", "join"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the logs do not say %q: the run did not do what it must search (%d bytes):\n%s", want, len(out), out)
		}
	}
	for _, s := range made {
		if s.value == "" {
			continue
		}
		if strings.Contains(out, s.value) {
			t.Errorf("the logs hold the %s", s.what)
		}
		for _, e := range errs {
			if strings.Contains(e.Error(), s.value) {
				t.Errorf("error %q holds the %s", e, s.what)
			}
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", out)
	}
	t.Logf("searched %d bytes of logs and %d errors for %d secrets", len(out), len(errs), len(made))
}

// runAgent runs an agent until the returned stop is called (idempotent).
func runAgent(t *testing.T, cfg agent.Config, log *slog.Logger) func() error {
	t.Helper()
	a := agent.New(cfg, fleetkit.EmbeddedRuntime(), &fleetkit.Notifier{}, log)
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(rctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("agent did not stop")
			}
			if errors.Is(runErr, context.Canceled) {
				runErr = nil
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// pemBodyLine is the first base64 line of a PEM block's body.
func pemBodyLine(b []byte) string {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return ""
	}
	return lines[1]
}

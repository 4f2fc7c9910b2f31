package joinendpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

func writeToken(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestJoinEndpoint: the bootstrap machine's endpoint registers its token;
// a worker with only that token file (started before the endpoint, so it
// retries) gets its certificate and the gossip secret; a revoked token is
// refused at once with the reason.
func TestJoinEndpoint(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{TLS: true})
	cpDir := etcdtest.ControlPlaneDir(t)
	boot, _ := token.Generate()
	bootFile := writeToken(t, boot.Reveal())
	listen := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	log := logging.Test(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workerDir := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	obtain := Obtain(ClientConfig{Name: "w-1", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{listen}, TokenFile: bootFile}, log)
	obtained := make(chan error, 1)
	go func() { obtained <- obtain(ctx, workerDir) }()

	je := New(Config{
		Name: "cp-1", Dir: cpDir, Listen: listen, Endpoints: cl.Endpoints(), TokenFile: bootFile, Bootstrap: true, Poll: 50 * time.Millisecond,
	}, log)
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()

	select {
	case err := <-obtained:
		if err != nil {
			t.Fatalf("worker join: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("worker did not join within 60s")
	}
	b, _ := os.ReadFile(workerDir.Cert(pki.NodeLeaf))
	cert, err := pki.ParseCert(b)
	if err != nil || cert.Subject.CommonName != "node:w-1" {
		t.Fatalf("worker certificate: %v %v", cert, err)
	}
	// The worker's certificate opens etcd (node identity).
	if _, err := pki.ClientTLS(workerDir.CACert(), workerDir.Cert(pki.NodeLeaf), workerDir.Key(pki.NodeLeaf)); err != nil {
		t.Fatal(err)
	}
	if s, err := GossipSecret(workerDir, ""); err != nil || string(s) != boot.Reveal() {
		t.Fatalf("gossip secret: %v", err)
	}
	// The endpoint made the node's etcd user and role (package rbac).
	if u, err := cl.Client(t).UserGet(ctx, pki.NodeIdentity("w-1")); err != nil || len(u.Roles) != 1 || u.Roles[0] != pki.NodeIdentity("w-1") {
		t.Fatalf("etcd user of w-1: %+v %v", u, err)
	}

	// The bootstrap token is registered: all roles, no expiry, one use.
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.Load(cpDir.SecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	reg := token.NewRegistry(secrets.New(st, box))
	bt, err := reg.Get(ctx, boot.ID)
	if err != nil || !bt.Spec.ExpiresAt.IsZero() || len(bt.Spec.Roles) != 3 || bt.Status.Uses != 1 {
		t.Fatalf("bootstrap token: %+v %v", bt, err)
	}

	// A control-plane machine with the bootstrap token gets the bundle.
	cp2 := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	if err := Obtain(ClientConfig{Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, Endpoints: []string{listen}, TokenFile: bootFile}, log)(ctx, cp2); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cp2.CAKey(), cp2.SecretsKey(), cp2.Cert(pki.CoordinatorLeaf), cp2.Key(pki.RootLeaf), cp2.Cert(pki.NodeLeaf)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v", f, err)
		}
	}

	// A revoked token: refused at once, saying so, with no secret shown.
	tok, _, err := reg.Create(ctx, token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Revoke(ctx, tok.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	err = Obtain(ClientConfig{Name: "w-2", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{listen}, TokenFile: writeToken(t, tok.Reveal())}, log)(ctx, pki.Dir(t.TempDir()))
	if !errors.Is(err, token.ErrRevoked) || !strings.Contains(err.Error(), "token "+tok.ID+" was revoked") || strings.Contains(err.Error(), tok.Secret) {
		t.Fatalf("revoked token: %v", err)
	}
	// A token file that holds no token.
	err = Obtain(ClientConfig{Name: "w-3", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{listen}, TokenFile: writeToken(t, "not-a-token")}, log)(ctx, pki.Dir(t.TempDir()))
	if !errors.Is(err, token.ErrMalformed) {
		t.Fatalf("bad token file: %v", err)
	}
	// A live node's name is not given to a second machine.
	if _, err := st.Client().Put(ctx, store.HeartbeatKey("w-1"), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	err = Obtain(ClientConfig{Name: "w-1", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{listen}, TokenFile: bootFile}, log)(ctx, pki.Dir(t.TempDir()))
	if !errors.Is(err, enroll.ErrNameInUse) || !strings.Contains(err.Error(), "node w-1 is alive") {
		t.Fatalf("join as a live node: %v", err)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("endpoint: %v", err)
	}
}

// serveJoinEndpoint runs je until ctx ends and waits until it serves; the
// returned channel gets what Run returned.
func serveJoinEndpoint(t *testing.T, ctx context.Context, je *Endpoint) <-chan error {
	t.Helper()
	je.Ready = make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()
	select {
	case <-je.Ready:
	case err := <-served:
		t.Fatalf("join endpoint: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("join endpoint not serving within 60s")
	}
	return served
}

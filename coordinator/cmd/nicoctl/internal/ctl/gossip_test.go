package ctl

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

func TestGossipRotateKey(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 0"}, nil)
	run(t, eps, "gossip", "rotate-key").want(t, 0, []string{"gossip key generation 1"}, nil)
	run(t, eps, "gossip", "rotate-key").want(t, 0, []string{"gossip key generation 2"}, nil)
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 2"}, nil)
	run(t, eps, "gossip").want(t, 2, nil, []string{"rotate-key or key"})
}

func TestGossipRotateSecret(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	ctx := testCtx(t)
	st, err := store.New(c.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]*ecdsa.PrivateKey{}
	for _, name := range []string{"a", "b", "c"} {
		n := api.NewNode(name)
		if name != "c" { // c runs an agent that publishes no certificate
			certPEM, keyPEM, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: pki.NodeIdentity(name), Usage: pki.UsageClient}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Certificate = string(certPEM)
			k, _ := pki.ParseKey(keyPEM)
			keys[name] = k.(*ecdsa.PrivateKey)
		}
		if err := st.Put(ctx, store.NodeKey(name), n); err != nil {
			t.Fatal(err)
		}
	}
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 0", "never replaced"}, nil)
	// c would leave the mesh: refused unless asked.
	run(t, eps, "gossip", "rotate-key", "--new-secret").want(t, 3, nil, []string{"c: no published node certificate", "--skip-unsealable"})
	if k, _ := gossipkey.Current(ctx, st); k.Spec.Generation != 0 {
		t.Fatalf("a refused rotation moved the generation to %d", k.Spec.Generation)
	}
	run(t, eps, "gossip", "rotate-key", "--new-secret", "--skip-unsealable").want(t, 0,
		[]string{"gossip key generation 1 derives from a new secret, sealed to 2 node(s)"}, []string{"warning: no sealed secret for node c: no published"})
	k, _ := gossipkey.Current(ctx, st)
	if k.Spec.SecretGeneration != 1 || k.Spec.SecretCheck == "" {
		t.Fatalf("stored key: %+v", k.Spec)
	}
	var secret []byte
	for name, key := range keys {
		s := api.NewGossipSecret(name)
		if err := st.Get(ctx, store.NodeGossipSecretKey(name), s); err != nil {
			t.Fatal(err)
		}
		got, err := gossipkey.Open(key, name, s.Spec.Generation, s.Spec.Sealed)
		if err != nil || gossip.SecretCheck(got, 1) != k.Spec.SecretCheck || (secret != nil && !bytes.Equal(got, secret)) {
			t.Fatalf("%s's sealed secret: %v", name, err)
		}
		secret = got
	}
	if err := st.Get(ctx, store.NodeGossipSecretKey("c"), api.NewGossipSecret("c")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("c's sealed secret: %v", err)
	}
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 1", "secret replaced at generation 1"}, nil)
	// A plain rotation keeps the secret.
	run(t, eps, "gossip", "rotate-key").want(t, 0, []string{"gossip key generation 2"}, nil)
	if k, _ := gossipkey.Current(ctx, st); k.Spec.SecretGeneration != 1 || k.Spec.Generation != 2 {
		t.Fatalf("after a plain rotation: %+v", k.Spec)
	}
}

// TestTokenRevokeWarnsOfTheGossipSecret: revoking the bootstrap token
// while gossip keys still derive from it says so, and suggests the
// secret's rotation; once rotated, or for another token, it does not.
func TestTokenRevokeWarnsOfTheGossipSecret(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	ctx := testCtx(t)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	key, _ := secretbox.NewKey()
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(c.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(key)
	reg := token.NewRegistry(secrets.New(st, box))
	boot, _ := token.Generate()
	if _, err := reg.Register(ctx, boot, token.Spec{Roles: token.AllRoles, Description: "bootstrap token (tokenFile of cp-1)"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	other, _ := token.Generate()
	if _, err := reg.Register(ctx, other, token.Spec{Roles: token.AllRoles, Description: "rack 4"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tk := func(args ...string) result {
		return run(t, eps, append([]string{"--secrets.keyFile", keyFile}, args...)...)
	}
	r := tk("token", "revoke", other.ID)
	r.want(t, 0, []string{"revoked"}, nil)
	if strings.Contains(r.stderr, "gossip") {
		t.Fatalf("revoking another token warns of gossip: %s", r.stderr)
	}
	r = tk("token", "revoke", boot.ID)
	r.want(t, 0, []string{"revoked"}, []string{"gossip mesh's keys still derive from token " + boot.ID, "nicoctl gossip rotate-key --new-secret"})
	if strings.Contains(r.stdout+r.stderr, boot.Secret) {
		t.Fatal("the warning shows the token's secret")
	}
	// Once the secret was replaced, no warning.
	k := api.NewGossipKey()
	k.Spec = api.GossipKeySpec{Generation: 1, SecretGeneration: 1, SecretCheck: "x"}
	if err := st.Put(ctx, store.GossipKeyKey, k); err != nil {
		t.Fatal(err)
	}
	if r := tk("token", "revoke", boot.ID); strings.Contains(r.stderr, "gossip") {
		t.Fatalf("warned after the secret's rotation: %s", r.stderr)
	}
}

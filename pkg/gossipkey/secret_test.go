package gossipkey

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// nodeWithCert issues name's node certificate into a new pki.dir and
// returns the dir and the node object publishing the certificate.
func nodeWithCert(t *testing.T, ca *pki.CA, name string) (pki.Dir, *api.Node) {
	t.Helper()
	d := pki.Dir(t.TempDir())
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity(name), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(d.Cert(pki.NodeLeaf), certPEM, d.Key(pki.NodeLeaf), keyPEM); err != nil {
		t.Fatal(err)
	}
	n := api.NewNode(name)
	n.Status.Certificate = string(certPEM)
	return d, n
}

func TestRecipients(t *testing.T) {
	ca, _ := pki.NewCA("test", 0, time.Now())
	other, _ := pki.NewCA("other", 0, time.Now())
	_, a := nodeWithCert(t, ca, "a")
	_, wrongCN := nodeWithCert(t, ca, "x")
	wrongCN.Metadata.Name = "b"
	_, foreign := nodeWithCert(t, other, "c")
	none := api.NewNode("d")
	_, removed := nodeWithCert(t, ca, "e")
	removed.Status.Phase = api.NodeRemoved
	ok, skipped := Recipients([]*api.Node{a, wrongCN, foreign, none, removed}, ca.Pool(), time.Now())
	if len(ok) != 1 || ok[0].Name != "a" {
		t.Fatalf("recipients %v, want a alone (skipped %v)", ok, skipped)
	}
	for name, want := range map[string]string{"b": `is for "node:x"`, "c": "does not chain", "d": "no published node certificate"} {
		if !strings.Contains(skipped[name], want) {
			t.Errorf("%s skipped for %q, want %q", name, skipped[name], want)
		}
	}
	if _, in := skipped["e"]; in {
		t.Error("a removed node is reported skipped")
	}
	if _, skipped := Recipients([]*api.Node{a}, ca.Pool(), time.Now().Add(2*365*24*time.Hour)); !strings.Contains(skipped["a"], "valid from") {
		t.Errorf("an expired certificate: %v", skipped)
	}
}

func bufLogger(b *logging.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// follower is a real mesh member following the stored key and secret.
type follower struct {
	*gossip.Mesh
	dir pki.Dir
}

func startFollower(t *testing.T, st *store.Store, name, ip string, d pki.Dir, log *logging.Buffer, seeds ...string) follower {
	t.Helper()
	m, err := gossip.New(gossip.Config{Name: name, BindAddr: ip, Profile: gossip.ProfileFast, Token: []byte("first-token"), Seeds: seeds,
		Logger: bufLogger(log).With("node", name)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop, err := gossip.Background(ctx, m, logging.Test(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowSecret(ctx, st, m, Member{Name: name, Dir: d, Persist: true}, 50*time.Millisecond, bufLogger(log).With("node", name))
	}()
	t.Cleanup(func() { stop(); cancel(); <-done })
	return follower{m, d}
}

// TestRotateSecretAndFollow: members open the secret sealed to them,
// persist it (0600) and move to it; one whose sealed secret is missing
// says so once and keeps its keys; one that got the secret by joining
// (gossip.secret) installs it without a sealed copy.
func TestRotateSecretAndFollow(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ca, _ := pki.NewCA("test", 0, time.Now())
	log := &logging.Buffer{}
	da, na := nodeWithCert(t, ca, "a")
	db, nb := nodeWithCert(t, ca, "b")
	dc, _ := nodeWithCert(t, ca, "c") // published no certificate
	a := startFollower(t, st, "a", "127.0.0.91", da, log)
	b := startFollower(t, st, "b", "127.0.0.92", db, log, a.Addr())
	c := startFollower(t, st, "c", "127.0.0.93", dc, log, a.Addr())
	if _, err := Rotate(ctx, st, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "all on generation 1", func() (bool, string) {
		return a.KeyGeneration() == 1 && b.KeyGeneration() == 1 && c.KeyGeneration() == 1, ""
	})

	to, skipped := Recipients([]*api.Node{na, nb}, ca.Pool(), time.Now())
	if len(to) != 2 || len(skipped) != 0 {
		t.Fatalf("recipients %v, skipped %v", to, skipped)
	}
	gen, err := RotateSecret(ctx, st, to, "test", time.Now())
	if err != nil || gen != 2 {
		t.Fatalf("RotateSecret: %d, %v; want generation 2", gen, err)
	}
	k, _ := Current(ctx, st)
	testwait.For(t, 20*time.Second, "a and b on the new secret", func() (bool, string) {
		return a.SecretGeneration() == 2 && b.SecretGeneration() == 2 && a.KeyGeneration() == 2 && b.KeyGeneration() == 2,
			fmt.Sprintf("a %d/%d, b %d/%d", a.SecretGeneration(), a.KeyGeneration(), b.SecretGeneration(), b.KeyGeneration())
	})
	testwait.For(t, 20*time.Second, "a and b to drop the replaced secret", func() (bool, string) {
		return !a.HoldsPreviousSecret() && !b.HoldsPreviousSecret(), ""
	})
	var secret []byte
	for _, f := range []follower{a, b} {
		fi, err := os.Stat(enroll.GossipSecretFile(f.dir))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("gossip.secret: %v, %v; want mode 0600", fi, err)
		}
		s, _ := os.ReadFile(enroll.GossipSecretFile(f.dir))
		if gossip.SecretCheck(s, 2) != k.Spec.SecretCheck || (secret != nil && !bytes.Equal(s, secret)) {
			t.Fatal("the persisted secrets differ or do not match the stored check")
		}
		secret = s
	}
	testwait.For(t, 20*time.Second, "a and b alive to each other", func() (bool, string) {
		sa, _ := a.Node("b")
		sb, _ := b.Node("a")
		return sa.State == gossip.Alive && sb.State == gossip.Alive, fmt.Sprintf("a sees b %s, b sees a %s", sa.State, sb.State)
	})
	// c had no published certificate: nothing sealed to it; it says so.
	testwait.For(t, 20*time.Second, "c to report its missing secret", func() (bool, string) {
		return strings.Contains(log.String(), "no gossip secret sealed to this node"), ""
	})
	if c.SecretGeneration() != 0 {
		t.Fatalf("c installed secret generation %d without a sealed secret", c.SecretGeneration())
	}
	if n := strings.Count(log.String(), "cannot install the current gossip secret"); n != 1 {
		t.Fatalf("the missing secret was logged %d times, want once", n)
	}
	// c now gets the secret the way a joining machine does (gossip.secret).
	if err := pki.WriteFile(enroll.GossipSecretFile(dc), secret); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "c on the new secret", func() (bool, string) {
		return c.SecretGeneration() == 2, ""
	})
	// Through the join endpoint's call, a's secret is the current one.
	got, g, err := CurrentSecret(ctx, st, Member{Name: "a", Dir: da})
	if err != nil || g != 2 || !bytes.Equal(got, secret) {
		t.Fatalf("CurrentSecret: generation %d, %v", g, err)
	}
	// A sealed value moved to another node's key does not open there.
	sa := api.NewGossipSecret("a")
	if err := st.Get(ctx, store.NodeGossipSecretKey("a"), sa); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, store.NodeGossipSecretKey("b"), sa); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(enroll.GossipSecretFile(db)); err != nil {
		t.Fatal(err)
	}
	if _, err := Secret(ctx, st, Member{Name: "b", Dir: db}, k.Spec); !errors.Is(err, ErrOpen) {
		t.Fatalf("a's sealed secret opened as b's: %v", err)
	}
	if logs := log.String(); strings.Contains(logs, string(secret)) || strings.Contains(logs, hex.EncodeToString(secret)) || strings.Contains(logs, base64.StdEncoding.EncodeToString(secret)) {
		t.Fatal("the secret appears in the logs")
	}
	if _, err := RotateSecret(ctx, st, nil, "test", time.Now()); !errors.Is(err, ErrNoRecipient) {
		t.Fatalf("rotation to nobody: %v", err)
	}
}

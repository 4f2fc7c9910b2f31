package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// TestBootstrapOnTLS: an agent bootstrapping with an empty pki.dir makes the
// CA, starts its member with client and peer certificate authentication,
// and registers over mTLS; a client trusting the CA but presenting no
// certificate is refused, and the root certificate it issued is accepted.
func TestBootstrapOnTLS(t *testing.T) {
	peer, client := etcdtest.URLsFor(t, true)
	dir := t.TempDir()
	d := pki.Dir(filepath.Join(dir, "pki"))
	a := New(Config{
		Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true,
		DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client, DialTimeout: 5 * time.Second,
		HeartbeatTTL: 3 * time.Second, PKI: PKIConfig{Dir: d},
	}, member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond)), quietNotifier{}, logging.Test(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !a.Healthy() {
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("agent not healthy within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	root, err := etcdclient.Files{CA: d.CACert(), Cert: d.Cert(pki.RootLeaf), Key: d.Key(pki.RootLeaf)}.Load([]string{client})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, TLS: root})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	defer gcancel()
	if err := st.Get(gctx, store.NodeKey("cp-1"), &api.Node{}); err != nil {
		t.Fatalf("node not registered over TLS: %v", err)
	}

	pool, err := pki.LoadPool(d.CACert())
	if err != nil {
		t.Fatal(err)
	}
	anon, err := etcdclient.New(etcdclient.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	if _, err := anon.Get(actx, "x"); err == nil {
		t.Fatal("a client without a certificate read from etcd")
	}
}

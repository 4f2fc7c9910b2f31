package kubepki_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// t0 is the tests' clock.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// env is a real etcd (TLS), a root client scoped to nico's prefix (the
// store's) and one on the whole keyspace (raw), nico's store and secrets.
type env struct {
	etcd *etcdtest.Cluster
	root *clientv3.Client
	raw  *clientv3.Client
	st   *store.Store
	sec  *secrets.Store
}

func newEnv(t *testing.T) env {
	t.Helper()
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, c.Endpoints()...)
	st, err := store.New(root, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	key, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return env{etcd: c, root: root, raw: etcdtest.NewClient(t, c.Endpoints()...), st: st, sec: secrets.New(st, box)}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// secret reads a named secret.
func (e env) secret(t *testing.T, name string) *api.Secret {
	t.Helper()
	s := api.NewSecret(name)
	if err := e.sec.Get(ctxOf(t), store.NamedSecretKey(name), s); err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	return s
}

// clientWith is an etcd client presenting the key pair.
func (e env) clientWith(t *testing.T, certPEM, keyPEM []byte) *clientv3.Client {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: etcdtest.PKI(t).Pool(), Certificates: []tls.Certificate{pair}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.etcd.Endpoints(), DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

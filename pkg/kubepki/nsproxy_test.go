package kubepki_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdnsproxy"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// nsProxy is cluster c's namespacing proxy (package etcdnsproxy, what
// nico-etcd-proxy runs on a k3s server, examples/k3s) in front of the
// test's etcd, started from the files nico delivers: towards etcd it
// presents cluster c's etcd client identity and trusts nico's CA; towards
// its clients it serves the cluster's API server certificate (127.0.0.1
// is among its names) and asks for a certificate of the cluster's etcd
// identity.
type nsProxy struct {
	// URL is the proxy's client URL (https://127.0.0.1:PORT).
	URL string
	// Files are the files it was started with.
	ClusterCA, EtcdCA, ClientCert, ClientKey, ServingCert, ServingKey string
}

// writeProxyFiles writes cluster c's files the proxy runs with.
func writeProxyFiles(t *testing.T, e env, c string) nsProxy {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := pki.WriteFile(p, data); err != nil {
			t.Fatal(err)
		}
		return p
	}
	etcdClient := e.secret(t, kubepki.EtcdClientSecret(c)).Spec.Data
	serving := e.secret(t, kubepki.APIServerSecret(c)).Spec.Data
	return nsProxy{
		ClusterCA:   write("ca.crt", e.secret(t, kubepki.CASecret(c)).Spec.Data[kubepki.KeyCert]),
		EtcdCA:      write("etcd-ca.crt", etcdtest.PKI(t).CertPEM),
		ClientCert:  write("apiserver-etcd-client.crt", etcdClient[kubepki.KeyCert]),
		ClientKey:   write("apiserver-etcd-client.key", etcdClient[kubepki.KeyKey]),
		ServingCert: write("apiserver.crt", serving[kubepki.KeyCert]),
		ServingKey:  write("apiserver.key", serving[kubepki.KeyKey]),
	}
}

// startNSProxy starts cluster c's proxy (Ensure must have run for c),
// stopped at the test's end, and waits until the cluster's identity can
// list /bootstrap through it.
func startNSProxy(t *testing.T, e env, c string) nsProxy {
	t.Helper()
	p := writeProxyFiles(t, e, c)
	backend, server, err := etcdnsproxy.Files{EtcdCA: p.EtcdCA, Cert: p.ClientCert, Key: p.ClientKey,
		ServingCert: p.ServingCert, ServingKey: p.ServingKey, ClientCA: p.EtcdCA}.TLS()
	if err != nil {
		t.Fatal(err)
	}
	px, err := etcdnsproxy.New(etcdnsproxy.Config{Namespace: kubepki.EtcdNamespace(c), Endpoints: e.etcd.Endpoints(),
		BackendTLS: backend, ServerTLS: server, ClientCommonName: kubepki.EtcdUser(c), Logger: logging.Test(t)}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "https://" + px.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- px.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy of %s: %v", c, err)
		}
	})
	cli := p.client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(t.Context(), time.Second)
		_, err := cli.Get(cctx, "/bootstrap", clientv3.WithPrefix(), clientv3.WithCountOnly())
		ccancel()
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy of %s not serving: %v", c, err)
		}
	}
}

// client is an etcd client of the proxy presenting the cluster's etcd
// identity and trusting the cluster CA (k3s's --datastore-* flags).
func (p nsProxy) client(t *testing.T) *clientv3.Client {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return p.clientTLS(t, &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.pool(t), Certificates: []tls.Certificate{pair}})
}

func (p nsProxy) pool(t *testing.T) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(p.ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

func (p nsProxy) clientTLS(t *testing.T, cfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL}, DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// provisionNamespaced makes cluster c's PKI and its namespaced etcd identity.
func provisionNamespaced(t *testing.T, e env, c, endpoint string) {
	t.Helper()
	ctx := ctxOf(t)
	cl := kubepki.Cluster{Name: c, Endpoint: endpoint, NicoCA: etcdtest.PKI(t), Machines: []string{c + "-cp-1"}}
	if _, err := kubepki.Ensure(ctx, e.sec, cl, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := kubepki.EnsureNamespacedEtcdIdentity(ctx, e.root.Auth, c); err != nil {
		t.Fatal(err)
	}
}

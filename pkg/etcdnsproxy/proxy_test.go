package etcdnsproxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdnsproxy"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}

// TestNewRefuses: a config that cannot run is refused naming the field.
func TestNewRefuses(t *testing.T) {
	backend := etcdtest.ClientTLS(t, "kubernetes:a")
	server := &tls.Config{Certificates: backend.Certificates, ClientCAs: etcdtest.PKI(t).Pool()}
	ok := etcdnsproxy.Config{Namespace: "/clusters/a/", Endpoints: []string{"https://127.0.0.1:2379"}, BackendTLS: backend, ServerTLS: server}
	for name, tc := range map[string]struct {
		change func(*etcdnsproxy.Config)
		want   string
	}{
		"no trailing slash": {func(c *etcdnsproxy.Config) { c.Namespace = "/clusters/a" }, `namespace "/clusters/a"`},
		"empty namespace":   {func(c *etcdnsproxy.Config) { c.Namespace = "" }, "namespace"},
		"no endpoints":      {func(c *etcdnsproxy.Config) { c.Endpoints = nil }, "endpoints"},
		"no identity":       {func(c *etcdnsproxy.Config) { c.BackendTLS = &tls.Config{} }, "backend TLS"},
		"no client CA":      {func(c *etcdnsproxy.Config) { c.ServerTLS = &tls.Config{Certificates: backend.Certificates} }, "server TLS"},
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			_, err := etcdnsproxy.New(c, "127.0.0.1:0")
			if !errors.Is(err, etcdnsproxy.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrConfig naming %s", err, tc.want)
			}
		})
	}
}

// TestRunStops: the proxy serves a namespaced Put and Get on a real etcd
// and returns nil, with no goroutine left (TestMain), when its context
// ends.
func TestRunStops(t *testing.T) {
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	raw := etcdtest.NewClient(t, c.Endpoints()...)
	backend := etcdtest.ClientTLS(t, pki.RootIdentity)
	serving, key, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: "proxy", Usage: pki.UsageServer, DNSNames: []string{"localhost"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving, key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := etcdnsproxy.New(etcdnsproxy.Config{Namespace: "/ns/", Endpoints: c.Endpoints(), BackendTLS: backend,
		ServerTLS: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: etcdtest.PKI(t).Pool()}, Logger: logging.Test(t)}, "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	ctls := etcdtest.ClientTLS(t, "anyone")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://localhost:" + port(p)}, TLS: ctls, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if _, err := cli.Put(rctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if r, err := raw.Get(rctx, "/ns//k"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("/ns//k: %v, %v", r, err)
	}
	// A watch sees its events with the client's keys, and a progress
	// request (kube-apiserver's, for consistent reads from its cache) is
	// answered.
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(rctx))
	defer wcancel()
	wch := cli.Watch(wctx, "/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	if r := <-wch; !r.Created {
		t.Fatalf("first watch response %+v, want created", r)
	}
	if _, err := raw.Put(rctx, "/other", "outside"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(rctx, "/k", "v2"); err != nil {
		t.Fatal(err)
	}
	r := <-wch
	if err := r.Err(); err != nil || len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "/k" || string(r.Events[0].PrevKv.Key) != "/k" || string(r.Events[0].Kv.Value) != "v2" {
		t.Fatalf("watch response %+v, %v: want one event on /k", r, err)
	}
	rev := r.Events[0].Kv.ModRevision
	if err := cli.RequestProgress(wctx); err != nil {
		t.Fatal(err)
	}
	if r := <-wch; !r.IsProgressNotify() || r.Header.Revision < rev {
		t.Fatalf("after a progress request: %+v, want a progress notification", r)
	}
	cli.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func port(p *etcdnsproxy.Proxy) string {
	a := p.Addr().String()
	return a[strings.LastIndex(a, ":")+1:]
}

// startProxy runs a proxy of namespace /ns/ on c until the test ends and
// returns a client of it.
func startProxy(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	serving, key, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: "proxy", Usage: pki.UsageServer, DNSNames: []string{"localhost"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving, key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := etcdnsproxy.New(etcdnsproxy.Config{Namespace: "/ns/", Endpoints: c.Endpoints(), BackendTLS: etcdtest.ClientTLS(t, pki.RootIdentity),
		ServerTLS: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: etcdtest.PKI(t).Pool()}, Logger: logging.Test(t)}, "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://localhost:" + port(p)}, TLS: etcdtest.ClientTLS(t, "anyone"), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return cli
}

// TestServersSeeEachOthersWrites: each server of a cluster runs its own
// proxy; a serializable read through one sees what was written through
// the other (etcd's grpcproxy KV proxy answered it from a cache that only
// its own writes invalidate).
func TestServersSeeEachOthersWrites(t *testing.T) {
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	a, b := startProxy(t, c), startProxy(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := a.Put(ctx, "/registry/x", "1"); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Get(ctx, "/registry/x", clientv3.WithSerializable()); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "1" {
		t.Fatalf("b reads %v, %v", r, err)
	}
	if _, err := a.Put(ctx, "/registry/x", "2"); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Get(ctx, "/registry/x", clientv3.WithSerializable()); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "2" {
		t.Fatalf("b reads %v, %v after a wrote 2", r, err)
	}
}

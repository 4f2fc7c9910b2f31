package kubepki_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// k3sBootstrap stands in for what a k3s server asks of its datastore
// endpoint on start (k3s itself is not run: no k3s binary here): it lists
// the whole /bootstrap prefix, refusing to go on when it finds a key other
// than its own, creates /bootstrap/<hash> if absent (a transaction on the
// key's create revision), and writes the API server's keys under
// /registry/, k3s having no prefix option of its own.
func k3sBootstrap(ctx context.Context, cli *clientv3.Client, hash string) error {
	own := "/bootstrap/" + hash
	r, err := cli.Get(ctx, "/bootstrap", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		if string(kv.Key) != own {
			return errors.New("bootstrap data of another cluster: " + string(kv.Key))
		}
	}
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(own), "=", 0)).Then(clientv3.OpPut(own, "sealed bootstrap data")).Commit(); err != nil {
		return err
	}
	_, err = cli.Put(ctx, "/registry/namespaces/default", "ns")
	return err
}

// TestNamespaceProxyK3sStorage: two clusters with spec.etcd.namespace on
// one real etcd (TLS, auth on as nico sets it up), each behind its own
// real `etcd grpc-proxy --namespace` with its own etcd identity. What the
// k3s stand-in writes lands under /clusters/<c>/; each sees only its own
// /bootstrap key, so both start; and nothing outside the namespace is
// reachable through the proxy or with the identity directly.
func TestNamespaceProxyK3sStorage(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	if err := rbac.EnableAuth(ctx, e.root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Put(ctx, store.DefaultPrefix+store.NodeKey("cp-1"), "{}"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Put(ctx, "/clusters/ax/registry/pods/a", "sibling"); err != nil {
		t.Fatal(err)
	}
	provisionNamespaced(t, e, "a", "https://10.0.0.10:6443")
	provisionNamespaced(t, e, "b", "https://10.0.0.20:6443")
	pa, pb := startNSProxy(t, e, "a"), startNSProxy(t, e, "b")
	ca, cb := pa.client(t), pb.client(t)

	if err := k3sBootstrap(ctx, ca, "hash-a"); err != nil {
		t.Fatalf("cluster a's k3s through its proxy: %v", err)
	}
	if err := k3sBootstrap(ctx, cb, "hash-b"); err != nil {
		t.Fatalf("cluster b's k3s through its proxy (it must not see a's bootstrap key): %v", err)
	}
	if err := k3sBootstrap(ctx, ca, "hash-a"); err != nil {
		t.Fatalf("cluster a's k3s restarted: %v", err)
	}
	for _, k := range []string{"/clusters/a//bootstrap/hash-a", "/clusters/a//registry/namespaces/default", "/clusters/b//bootstrap/hash-b", "/clusters/b//registry/namespaces/default"} {
		if r, err := e.raw.Get(ctx, k); err != nil || len(r.Kvs) != 1 {
			t.Errorf("%s in etcd: %v, %v", k, r, err)
		}
	}
	for _, p := range []string{"/bootstrap", "/registry"} {
		if r, err := e.raw.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
			t.Errorf("%d keys at the top-level %s, %v", r.Count, p, err)
		}
	}
	r, err := cb.Get(ctx, "/bootstrap", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Key) != "/bootstrap/hash-b" {
		t.Fatalf("cluster b's /bootstrap: %v, %v", r, err)
	}

	// Through the proxy, every key and range lies inside the namespace:
	// the whole keyspace as a's proxy shows it is a's keys.
	all, err := ca.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("a's whole keyspace through its proxy: %v", err)
	}
	var keys []string
	for _, kv := range all.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if want := []string{"/bootstrap/hash-a", "/registry/namespaces/default"}; !slices.Equal(keys, want) {
		t.Fatalf("a's proxy shows %q, want %q", keys, want)
	}
	if _, err := ca.Put(ctx, "/../b//bootstrap/hash-a", "x"); err != nil {
		t.Fatal(err)
	}
	if r, err := cb.Get(ctx, "/bootstrap", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 1 {
		t.Fatalf("b's /bootstrap after a wrote a key that looks like b's: %v, %v", r, err)
	}
	if _, err := ca.Delete(ctx, "", clientv3.WithFromKey()); err != nil {
		t.Fatal(err)
	}
	for what, key := range map[string]string{"b's key": "/clusters/b//bootstrap/hash-b", "the sibling's": "/clusters/ax/registry/pods/a", "nico's node": store.DefaultPrefix + store.NodeKey("cp-1")} {
		if r, err := e.raw.Get(ctx, key, clientv3.WithCountOnly()); err != nil || r.Count != 1 {
			t.Errorf("%s after a deleted its whole keyspace: %v, %v", what, r, err)
		}
	}
	if r, err := e.raw.Get(ctx, kubepki.ClusterKeyPrefix("a"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Errorf("a's keys after it deleted its whole keyspace: %v, %v", r, err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s: %v, want permission denied", what, err)
		}
	}
	_, err = ca.UserList(ctx)
	if err == nil {
		t.Error("the proxy served the Auth API")
	}
	// The identity itself, straight to etcd, reaches only /clusters/a/.
	id := e.secret(t, kubepki.EtcdClientSecret("a")).Spec.Data
	direct := e.clientWith(t, id[kubepki.KeyCert], id[kubepki.KeyKey])
	if _, err := direct.Get(ctx, "/clusters/a//bootstrap/hash-a"); err != nil {
		t.Errorf("a's identity reads its namespace directly: %v", err)
	}
	for what, key := range map[string]string{
		"b's namespace":      "/clusters/b//bootstrap/hash-b",
		"a sibling's prefix": "/clusters/ax/registry/pods/a",
		"nico's node":        store.DefaultPrefix + store.NodeKey("cp-1"),
		"the top /bootstrap": "/bootstrap/hash-a",
		"nico's prefix":      store.DefaultPrefix,
		"compact_rev_key":    kubepki.CompactRevKey,
	} {
		_, err := direct.Get(ctx, key)
		denied("read "+what+" directly", err)
		_, err = direct.Put(ctx, key, "x")
		denied("write "+what+" directly", err)
	}
	// The proxy serves only the cluster's identity: not a client with no
	// certificate, not b's identity, not another certificate of nico's CA.
	other := etcdtest.ClientTLS(t, "node:cp-1")
	other.RootCAs = pa.pool(t)
	bID := e.secret(t, kubepki.EtcdClientSecret("b")).Spec.Data
	bPair, err := tls.X509KeyPair(bID[kubepki.KeyCert], bID[kubepki.KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	for what, cfg := range map[string]*tls.Config{
		"no certificate":      {MinVersion: tls.VersionTLS12, RootCAs: pa.pool(t)},
		"b's etcd identity":   {MinVersion: tls.VersionTLS12, RootCAs: pa.pool(t), Certificates: []tls.Certificate{bPair}},
		"a node of nico's CA": other,
	} {
		cli := pa.clientTLS(t, cfg)
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(actx, "/bootstrap", clientv3.WithPrefix())
		cancel()
		if err == nil {
			t.Errorf("a's proxy served a client with %s", what)
		}
	}
}

// TestEtcdGRPCProxyRefusesClusterIdentity records why nico runs its own
// proxy: etcd's `grpc-proxy start --namespace` refuses, as its backend
// identity, a certificate with a Common Name, and the cluster's etcd
// identity is its certificate's Common Name (kubernetes:<c>).
func TestEtcdGRPCProxyRefusesClusterIdentity(t *testing.T) {
	bins := etcdtest.Binaries(t)
	e := newEnv(t)
	provisionNamespaced(t, e, "a", "https://10.0.0.10:6443")
	f := writeProxyFiles(t, e, "a")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins[len(bins)-1].Path, "grpc-proxy", "start",
		"--namespace="+kubepki.EtcdNamespace("a"), "--endpoints="+strings.Join(e.etcd.Endpoints(), ","),
		"--cacert="+f.EtcdCA, "--cert="+f.ClientCert, "--key="+f.ClientKey,
		"--listen-addr=127.0.0.1:0", "--cert-file="+f.ServingCert, "--key-file="+f.ServingKey,
		"--data-dir="+t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cert has non empty Common Name (kubernetes:a)") {
		t.Fatalf("etcd grpc-proxy with the cluster's identity: %v\n%s", err, tail(string(out), 2000))
	}
}

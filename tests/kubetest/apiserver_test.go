package kubetest_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/kubetest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestAPIServerUnderPrefix runs a real control plane (kube-apiserver,
// controller-manager, scheduler) on a real etcd with TLS and auth on, as an
// etcd user whose role reaches /clusters/c1/registry/ only: it gets ready,
// kubectl (the built one) reads /readyz and the namespaces and writes and
// reads a ConfigMap, whose key lies under the prefix; the same identity is
// refused everywhere else.
func TestAPIServerUnderPrefix(t *testing.T) {
	bins := kubetest.FindBinaries(t)
	ec := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, ec.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := rbac.EnableAuth(ctx, root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	const user, prefix = "kube-apiserver:c1", "/clusters/c1/registry"
	if err := kubetest.GrantPrefix(ctx, root.Auth, user, prefix+"/"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	port := etcdtest.FreePort(t)
	server := "https://127.0.0.1:" + itoa(port)
	files, err := kubetest.WritePKI(filepath.Join(dir, "etc"), server, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	etcdCert, etcdKey, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: user, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WriteEtcdClient(files, etcdtest.PKI(t).CertPEM, etcdCert, etcdKey); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	cp, err := kubetest.StartControlPlane(ctx, kubetest.ControlPlaneConfig{
		Binaries: bins, Files: files, EtcdServers: ec.Endpoints(), EtcdPrefix: prefix, Port: port, Dir: filepath.Join(dir, "run"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the etcd's cleanup, so it runs first: the API server
	// stops before its etcd.
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("control plane ready %s after start", time.Since(start).Round(time.Millisecond))

	k := kubetest.Kubectl{Bin: bins.Kubectl, Kubeconfig: files.AdminKubeconfig}
	run := func(stdin string, args ...string) string {
		t.Helper()
		var in []byte
		if stdin != "" {
			in = []byte(stdin)
		}
		out, err := k.Run(ctx, in, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("", "get", "--raw", "/readyz"); got != "ok" {
		t.Fatalf("kubectl get --raw /readyz = %q, want ok", got)
	}
	if got := run("", "get", "ns", "-o", "name"); !strings.Contains(got, "namespace/default") || !strings.Contains(got, "namespace/kube-system") {
		t.Fatalf("kubectl get ns = %q, want default and kube-system", got)
	}
	run("", "create", "configmap", "probe", "--from-literal=answer=42")
	if got := run("", "get", "configmap", "probe", "-o", "jsonpath={.data.answer}"); got != "42" {
		t.Fatalf("configmap probe's answer = %q, want 42", got)
	}
	// Authentication is real: anonymous requests read /readyz only, and a
	// certificate of another CA is no user (the handshake asks for the
	// cluster CA's, so it stays anonymous).
	if code := getStatus(t, server+"/api/v1/namespaces", files.CACert, nil); code != http.StatusForbidden {
		t.Fatalf("anonymous GET namespaces: %d, want 403", code)
	}
	if code := getStatus(t, server+"/readyz", files.CACert, nil); code != http.StatusOK {
		t.Fatalf("anonymous GET /readyz: %d, want 200", code)
	}
	stranger := etcdtest.ClientTLS(t, "kubernetes-admin") // etcd's CA, not the cluster's
	if code := getStatus(t, server+"/api/v1/namespaces", files.CACert, stranger.Certificates); code != http.StatusForbidden {
		t.Fatalf("GET namespaces with another CA's certificate: %d, want 403", code)
	}

	t.Logf("memory: %s", cp.Memory())
	// Its identity's one prefix is all it needs.
	if log := cp.APIServer.Tail(1 << 22); strings.Contains(log, "permission denied") {
		t.Errorf("the API server was refused something by etcd; its log:\n%s", log)
	}

	// The ConfigMap lies under the prefix.
	kv, err := root.Get(ctx, prefix+"/configmaps/default/probe")
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("configmap under %s: %v, %v", prefix, kv, err)
	}

	// The API server's identity, with the very certificate it runs with,
	// reaches its prefix and nothing else.
	id, err := pki.ClientTLS(files.EtcdCA, files.EtcdCert, files.EtcdKey)
	if err != nil {
		t.Fatal(err)
	}
	cli := dialTLS(t, ec.Endpoints(), id)
	if _, err := cli.Get(ctx, prefix+"/configmaps/default/probe"); err != nil {
		t.Fatalf("its identity reads its own prefix: %v", err)
	}
	for _, key := range []string{store.DefaultPrefix + "nodes/x", "/clusters/c2/registry/x", "/clusters/c1/registry2", "compact_rev_key", "/"} {
		if _, err := cli.Get(ctx, key); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("its identity reads %q: %v, want permission denied", key, err)
		}
		if _, err := cli.Put(ctx, key, "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("its identity writes %q: %v, want permission denied", key, err)
		}
	}
	if _, err := cli.Compact(ctx, 1); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("its identity compacts: %v, want permission denied", err)
	}
}

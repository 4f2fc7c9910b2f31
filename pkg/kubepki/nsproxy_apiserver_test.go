package kubepki_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNamespaceProxyRealAPIServer: a real kube-apiserver with no
// --etcd-prefix (k3s's embedded one has none), its etcd flags as
// examples/k3s gives k3s's --datastore-* (the proxy's URL, the cluster CA
// that signed the proxy's serving certificate, the cluster's etcd client
// pair), gets ready through cluster demo's namespacing proxy on nico's
// etcd (TLS, auth on, the namespaced role), and its data lands under
// /clusters/demo/ and nowhere else.
func TestNamespaceProxyRealAPIServer(t *testing.T) {
	bin := os.Getenv(EnvKubeBinaries)
	if bin == "" {
		t.Skipf("%s is not set (e.g. /work/main/.cache/kube/v1.37.2)", EnvKubeBinaries)
	}
	e := newEnv(t)
	ctx := ctxOf(t)
	if err := rbac.EnableAuth(ctx, e.root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	port := etcdtest.FreePort(t)
	endpoint := fmt.Sprintf("https://127.0.0.1:%d", port)
	paths := deliverControlPlane(t, e, "demo", endpoint, kubepki.EnsureNamespacedEtcdIdentity)
	px := startNSProxy(t, e, "demo")
	args := append(apiServerArgs(paths, port),
		"--etcd-servers="+px.URL,
		"--etcd-cafile="+paths.CACert, "--etcd-certfile="+paths.EtcdClientCert, "--etcd-keyfile="+paths.EtcdClientKey)
	logFile := runAPIServer(t, e, bin, "demo", endpoint, args)

	kubectl := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", paths.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	kubectl("create", "configmap", "hello", "--from-literal=k=v")
	if out := kubectl("get", "configmap", "hello", "-o", "jsonpath={.data.k}"); out != "v" {
		t.Fatalf("configmap reads %q", out)
	}
	if r, err := e.raw.Get(ctx, kubepki.EtcdNamespace("demo")+"/registry/configmaps/default/hello"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the configmap is not under the namespace: %v, %v", r, err)
	}
	all, err := e.raw.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var outside []string
	n := 0
	for _, kv := range all.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, kubepki.EtcdNamespace("demo")):
			n++
		case strings.HasPrefix(k, store.DefaultPrefix):
		default:
			outside = append(outside, k)
		}
	}
	if len(outside) != 0 || n < 10 {
		t.Fatalf("%d keys under the namespace; keys outside it and nico's: %q", n, outside)
	}
	t.Logf("%d keys under %s", n, kubepki.EtcdNamespace("demo"))
	if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "permission denied") {
		t.Fatalf("the API server was refused by etcd:\n%s", grepLines(string(b), "permission denied"))
	}
}

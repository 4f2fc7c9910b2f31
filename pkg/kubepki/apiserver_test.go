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

// EnvKubeBinaries names the directory holding kube-apiserver and kubectl
// (tests/kubebin/build.sh's output); TestRealAPIServer runs only with it.
const EnvKubeBinaries = "NICO_KUBE_BINARIES"

// TestRealAPIServer: a real kube-apiserver runs on nico's etcd (TLS,
// auth on) with nothing but the files the control-plane layout delivers
// and the flags the package doc gives; its data lands under
// /clusters/demo/registry/ and the admin kubeconfig works with kubectl.
func TestRealAPIServer(t *testing.T) {
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
	paths := deliverControlPlane(t, e, "demo", endpoint, kubepki.EnsureEtcdIdentity)
	args := append(apiServerArgs(paths, port),
		"--etcd-servers="+strings.Join(e.etcd.Endpoints(), ","),
		"--etcd-cafile="+paths.EtcdCACert, "--etcd-certfile="+paths.EtcdClientCert, "--etcd-keyfile="+paths.EtcdClientKey,
		"--etcd-prefix="+kubepki.EtcdPrefix("demo"))
	logFile := runAPIServer(t, e, bin, "demo", endpoint, args)
	kubeconfig := paths.Kubeconfig // delivered: admin.conf
	kubectl := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	kubectl("create", "configmap", "hello", "--from-literal=k=v")
	if out := kubectl("get", "configmap", "hello", "-o", "jsonpath={.data.k}"); out != "v" {
		t.Fatalf("configmap reads %q", out)
	}
	r, err := e.raw.Get(ctx, kubepki.EtcdKeyPrefix("demo")+"configmaps/default/hello")
	if err != nil || len(r.Kvs) != 1 {
		all, _ := e.raw.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
		var keys []string
		for _, kv := range all.Kvs {
			if !strings.Contains(string(kv.Key), "/nico/") {
				keys = append(keys, string(kv.Key))
			}
		}
		t.Fatalf("the configmap is not at its key in nico's etcd (%v); configmap keys: %q", err, keys)
	}
	r, err = e.raw.Get(ctx, "/registry", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Fatalf("%d keys under /registry, %v", r.Count, err)
	}
	// A service account token is signed with the delivered sa.key.
	kubectl("create", "serviceaccount", "probe")
	if tok := kubectl("create", "token", "probe"); strings.Count(tok, ".") != 2 {
		t.Fatalf("token %q", tok)
	}
	// Nothing the API server asked of etcd was refused.
	if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "permission denied") {
		t.Fatalf("the API server was refused by etcd:\n%s", grepLines(string(b), "permission denied"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

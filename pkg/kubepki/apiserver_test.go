package kubepki_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
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
	nico := etcdtest.PKI(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: endpoint, NicoCA: nico, Machines: []string{"cp-1"}}
	if _, err := kubepki.Ensure(ctx, e.sec, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := kubepki.EnsureEtcdIdentity(ctx, e.root.Auth, "demo"); err != nil {
		t.Fatal(err)
	}
	// Deliver cp-1's files as the agent would: project, open, write.
	root := t.TempDir()
	paths := kubepki.DefaultPaths().Under(root)
	l := kubepki.Layout{Cluster: "demo", Paths: paths, NicoCACertPEM: nico.CertPEM}
	files := l.HostFiles("cp-1", kubepki.RoleControlPlane)
	p, err := kubepki.Select(ctx, e.sec, "demo", files)
	if err != nil {
		t.Fatal(err)
	}
	nodeCrt, nodeKey, err := nico.Issue(pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "node.key")
	if err := pki.WriteFile(keyFile, nodeKey); err != nil {
		t.Fatal(err)
	}
	crt, _ := pki.ParseCert(nodeCrt)
	if _, err := kubepki.Project(ctx, e.st, nil, "cp-1", crt, p); err != nil {
		t.Fatal(err)
	}
	hf := &apply.HostFiles{Roots: []string{root}, Secrets: kubepki.NodeSource{Store: e.st, Machine: "cp-1", KeyFile: keyFile}}
	if _, err := hf.Sync(ctx, files); err != nil {
		t.Fatal(err)
	}

	args := []string{
		"--etcd-servers=" + strings.Join(e.etcd.Endpoints(), ","),
		"--etcd-cafile=" + paths.EtcdCACert, "--etcd-certfile=" + paths.EtcdClientCert, "--etcd-keyfile=" + paths.EtcdClientKey,
		"--etcd-prefix=" + kubepki.EtcdPrefix("demo"), "--etcd-compaction-interval=0",
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + t.TempDir(),
		"--tls-cert-file=" + paths.APIServerCert, "--tls-private-key-file=" + paths.APIServerKey,
		"--client-ca-file=" + paths.CACert,
		"--service-account-key-file=" + paths.SAPub, "--service-account-signing-key-file=" + paths.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/12", "--authorization-mode=Node,RBAC",
		"--requestheader-client-ca-file=" + paths.FrontProxyCACert,
		"--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + paths.FrontProxyClientCert, "--proxy-client-key-file=" + paths.FrontProxyClientKey,
		"--kubelet-client-certificate=" + paths.KubeletClientCert, "--kubelet-client-key=" + paths.KubeletClientKey,
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bin, "kube-apiserver"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.secret(t, "demo-ca").Spec.Data[kubepki.KeyCert])
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := hc.Get(endpoint + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("kube-apiserver not ready: %v\n%s", err, tail(string(b), 3000))
		}
		// Until the next poll of /readyz, or the process's exit.
		select {
		case <-done:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("kube-apiserver exited: %v\n%s", waitErr, tail(string(b), 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("kube-apiserver ready after %s", time.Since(started).Round(time.Millisecond))
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
	if b, _ := os.ReadFile(logFile.Name()); strings.Contains(string(b), "permission denied") {
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

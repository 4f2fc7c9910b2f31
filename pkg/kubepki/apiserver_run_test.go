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
	"testing"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// deliverControlPlane provisions cluster c (its PKI, and its etcd identity
// with ensureID) and delivers the files of its control-plane machine
// c-cp-1 as the agent would (project, open, write) under a temporary root;
// it returns where they landed.
func deliverControlPlane(t *testing.T, e env, c, endpoint string, ensureID func(context.Context, clientv3.Auth, string) ([]rbac.Change, error)) kubepki.Paths {
	t.Helper()
	ctx := ctxOf(t)
	nico := etcdtest.PKI(t)
	m := c + "-cp-1"
	cl := kubepki.Cluster{Name: c, Endpoint: endpoint, NicoCA: nico, Machines: []string{m}}
	if _, err := kubepki.Ensure(ctx, e.sec, cl, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureID(ctx, e.root.Auth, c); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	paths := kubepki.DefaultPaths().Under(root)
	l := kubepki.Layout{Cluster: c, Paths: paths, NicoCACertPEM: nico.CertPEM}
	files := l.HostFiles(m, kubepki.RoleControlPlane)
	p, err := kubepki.Select(ctx, e.sec, c, files)
	if err != nil {
		t.Fatal(err)
	}
	nodeCrt, nodeKey, err := nico.Issue(pki.Request{CommonName: pki.NodeIdentity(m), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "node.key")
	if err := pki.WriteFile(keyFile, nodeKey); err != nil {
		t.Fatal(err)
	}
	crt, _ := pki.ParseCert(nodeCrt)
	if _, err := kubepki.Project(ctx, e.st, nil, m, crt, p); err != nil {
		t.Fatal(err)
	}
	hf := &apply.HostFiles{Roots: []string{root}, Secrets: kubepki.NodeSource{Store: e.st, Machine: m, KeyFile: keyFile}}
	if _, err := hf.Sync(ctx, files); err != nil {
		t.Fatal(err)
	}
	return paths
}

// apiServerArgs are kube-apiserver's flags but for etcd's, from the
// delivered files, serving on 127.0.0.1:port.
func apiServerArgs(paths kubepki.Paths, port int) []string {
	return []string{
		"--etcd-compaction-interval=0",
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none", fmt.Sprintf("--secure-port=%d", port),
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
}

// runAPIServer starts kube-apiserver from bin with args (stopped at the
// test's end), waits for its /readyz at endpoint (trusting cluster c's
// CA) and returns its log file.
func runAPIServer(t *testing.T, e env, bin, c, endpoint string, args []string) string {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(filepath.Join(bin, "kube-apiserver"), append(args, "--cert-dir="+t.TempDir())...)
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
	pool.AppendCertsFromPEM(e.secret(t, kubepki.CASecret(c)).Spec.Data[kubepki.KeyCert])
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
	return logFile.Name()
}

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}

// TestRunsWithTheSchemasArgs: the arguments nico's lib.clusterSchema
// gives a server (etcdProxy.args of a rendered cluster.nix, evaluated by
// real nix-instantiate) start this command against a real etcd, and a
// client with the cluster's identity at etcdProxy.url writes under the
// namespace: the Nix side and the binary agree on every flag.
func TestRunsWithTheSchemasArgs(t *testing.T) {
	if _, err := exec.LookPath("nix-instantiate"); err != nil {
		if os.Getenv("NICO_REQUIRE_NIX") == "1" {
			t.Fatal("nix-instantiate is not on PATH and NICO_REQUIRE_NIX=1")
		}
		t.Skip("nix-instantiate is not on PATH")
	}
	etcd := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	dir := t.TempDir()
	paths := clusternix.DefaultPaths()
	for _, p := range []*string{&paths.APIServerCert, &paths.APIServerKey, &paths.EtcdCACert, &paths.APIServerEtcdClientCert, &paths.APIServerEtcdClientKey,
		&paths.JoinToken, &paths.MachineSSHKey, &paths.CACert, &paths.CAKey, &paths.ServiceAccountKey, &paths.ServiceAccountPub,
		&paths.FrontProxyCACert, &paths.FrontProxyCAKey, &paths.Kubeconfig} {
		*p = filepath.Join(dir, *p)
	}
	ca := etcdtest.PKI(t)
	write := func(path string, data []byte) {
		t.Helper()
		if err := pki.WriteFile(path, data); err != nil {
			t.Fatal(err)
		}
	}
	idCert, idKey, err := ca.Issue(pki.Request{CommonName: "kubernetes:a", Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svCert, svKey, err := ca.Issue(pki.Request{CommonName: "kube-apiserver", Usage: pki.UsageServer, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write(paths.EtcdCACert, ca.CertPEM)
	write(paths.APIServerEtcdClientCert, idCert)
	write(paths.APIServerEtcdClientKey, idKey)
	write(paths.APIServerCert, svCert)
	write(paths.APIServerKey, svKey)

	c := clusternix.Cluster{Name: "a", Version: "1.37.2", ControlPlaneEndpoint: clusternix.Endpoint{Host: "127.0.0.1", Port: 6443},
		Nodes: clusternix.Nodes{ControlPlane: []clusternix.Node{{Name: "cp-1", Addresses: []string{"127.0.0.1"}}}},
		Etcd: clusternix.Etcd{Provider: clusternix.EtcdNico, Endpoints: etcd.Endpoints(),
			Proxy: &clusternix.EtcdProxy{Namespace: "/clusters/a/", Listen: clusternix.Endpoint{Host: "127.0.0.1", Port: etcdtest.FreePort(t)}, ClientCommonName: "kubernetes:a"}},
		Paths: paths}
	text, err := clusternix.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cluster.nix")
	write(file, text)
	_, self, _, _ := runtime.Caller(0)
	schema := filepath.Join(filepath.Dir(self), "..", "..", "..", "nixos-module", "lib", "cluster-schema.nix")
	expr := fmt.Sprintf(`((import (/. + %s)).load (/. + %s)).etcdProxy`, clusternix.Quote(schema), clusternix.Quote(file))
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("nix-instantiate", "--eval", "--strict", "--json", "--readonly-mode", "-E", expr)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nix-instantiate: %v\n%s", err, stderr.String())
	}
	var proxy struct {
		URL  string   `json:"url"`
		Args []string `json:"args"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &proxy); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var logs bytes.Buffer
	go func() { done <- run(ctx, proxy.Args, &logs) }()
	pair, err := tls.X509KeyPair(idCert, idKey)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	for {
		// Until the proxy listens (or the command exits).
		_, err = cli.Put(pctx, "/bootstrap/h", "x")
		if err == nil || pctx.Err() != nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("nico-etcd-proxy %q exited %d:\n%s", proxy.Args, code, logs.String())
		default:
		}
	}
	cli.Close()
	if err != nil {
		t.Fatalf("put through the proxy (%s %q): %v", proxy.URL, proxy.Args, err)
	}
	raw := etcdtest.NewClient(t, etcd.Endpoints()...)
	if r, err := raw.Get(t.Context(), "/clusters/a//bootstrap/h"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the key under the namespace: %v, %v", r, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after its context ended:\n%s", code, logs.String())
	}
}

package kubetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/tests/kubetest"
)

// TestAPIServerStopsWithRemoteWatchers stops an API server that another
// machine's controller-manager and scheduler watch through (as they do
// through a cluster's endpoint): it exits within the stop grace, not
// killed. Without --shutdown-send-retry-after its http.Server.Shutdown
// waits the request timeout (60 s) for those watches, and Stop killed it
// after 30 s.
func TestAPIServerStopsWithRemoteWatchers(t *testing.T) {
	bins := kubetest.FindBinaries(t)
	ec := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const endpoint = "https://127.0.0.7:6443"
	fa, err := kubetest.WritePKI(filepath.Join(dir, "a"), endpoint, "127.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WriteEtcdClient(fa, etcdtest.PKI(t).CertPEM, c, k); err != nil {
		t.Fatal(err)
	}
	a, err := kubetest.StartControlPlane(ctx, kubetest.ControlPlaneConfig{Binaries: bins, Files: fa, EtcdServers: ec.Endpoints(), EtcdPrefix: "/w", Host: "127.0.0.7", Port: 6443, Dir: filepath.Join(dir, "run-a")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })

	// Machine b: the same CAs, its own serving pair, its components'
	// kubeconfigs at a's address (the endpoint).
	lb := kubetest.Layout(filepath.Join(dir, "b"))
	fb := fa
	fb.APIServerCert, fb.APIServerKey = lb.APIServerCert, lb.APIServerKey
	fb.FrontProxyClientCert, fb.FrontProxyClientKey = lb.FrontProxyClientCert, lb.FrontProxyClientKey
	fb.AdminKubeconfig, fb.ControllerManagerKubeconfig, fb.SchedulerKubeconfig = lb.AdminKubeconfig, lb.ControllerManagerKubeconfig, lb.SchedulerKubeconfig
	ca, err := pki.LoadCA(fa.CACert, fa.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := pki.LoadCA(fa.FrontProxyCACert, fa.FrontProxyCAKey)
	if err != nil {
		t.Fatal(err)
	}
	if fb, err = kubetest.IssueMissing(fb, lb, ca, func() (*pki.CA, error) { return proxy, nil }, endpoint, "127.0.0.8", false); err != nil {
		t.Fatal(err)
	}
	b, err := kubetest.StartControlPlane(ctx, kubetest.ControlPlaneConfig{Binaries: bins, Files: fb, EtcdServers: ec.Endpoints(), EtcdPrefix: "/w", Host: "127.0.0.8", Port: 6443, Dir: filepath.Join(dir, "run-b")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })

	t0 := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatalf("stop a, watched from b: %v", err)
	}
	t.Logf("a stopped in %s", time.Since(t0).Round(time.Millisecond))
}

package kubetest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/kubetest"
)

// TestBootstrapTokenJoin: against a real control plane, EnsureBootstrap
// registers a bootstrap token and the node-bootstrapping bindings (a
// fenced-off leader writes nothing; a second call writes nothing); the
// token alone, in the bootstrap kubeconfig kubepki makes, files a node
// client CSR as a kubelet does, which the controller-manager approves and
// signs with the cluster CA; the certificate is system:node:<name> in
// system:nodes; the token reads no secret; an expired token is refused.
func TestBootstrapTokenJoin(t *testing.T) {
	bins := kubetest.FindBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := startControlPlane(ctx, t, bins, "c1")
	files, server, admin := cl.files, cl.server, cl.admin
	tok := kubepki.BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef", Expires: time.Now().Add(time.Hour).Truncate(time.Second)}
	b := kubeapi.Bootstrap{TokenID: tok.ID, TokenSecret: tok.Secret, Expires: tok.Expires, Group: kubepki.BootstrapGroup("c1"), Description: "test"}
	fenced := func(context.Context) error { return store.ErrNotLeader }
	if _, err := admin.EnsureBootstrap(ctx, b, fenced); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("fenced off: %v, want ErrNotLeader", err)
	}
	var sec kubeapi.Secret
	if err := admin.Get(ctx, "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef", &sec); !errors.Is(err, kubeapi.ErrNotFound) {
		t.Fatalf("a fenced-off leader wrote the token: %v", err)
	}
	ok := func(context.Context) error { return nil }
	wrote, err := admin.EnsureBootstrap(ctx, b, ok)
	if err != nil || len(wrote) != 5 {
		t.Fatalf("first registration wrote %v: %v", wrote, err)
	}
	if wrote, err := admin.EnsureBootstrap(ctx, b, ok); err != nil || len(wrote) != 0 {
		t.Fatalf("second registration wrote %v: %v", wrote, err)
	}

	// A kubelet with only the bootstrap kubeconfig.
	kubelet, err := kubeapi.FromKubeconfig(cl.bootstrapKubeconfig(t, tok))
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	if err := kubelet.Get(ctx, "/api/v1/namespaces/kube-system/secrets", &struct{}{}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("the bootstrap token lists secrets: %v, want 403", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:w-1", Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	type csrT struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Metadata   kubeapi.ObjectMeta `json:"metadata"`
		Spec       struct {
			Request    []byte   `json:"request"`
			SignerName string   `json:"signerName"`
			Usages     []string `json:"usages"`
		} `json:"spec"`
		Status struct {
			Certificate []byte `json:"certificate"`
			Conditions  []struct {
				Type string `json:"type"`
			} `json:"conditions"`
		} `json:"status"`
	}
	csr := csrT{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest", Metadata: kubeapi.ObjectMeta{Name: "node-csr-w-1"}}
	csr.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	csr.Spec.SignerName = "kubernetes.io/kube-apiserver-client-kubelet"
	csr.Spec.Usages = []string{"digital signature", "client auth"}
	if err := kubelet.Create(ctx, "/apis/certificates.k8s.io/v1/certificatesigningrequests", &csr); err != nil {
		t.Fatalf("the bootstrap token files a node CSR: %v", err)
	}
	start := time.Now()
	var got csrT
	for len(got.Status.Certificate) == 0 {
		if err := kubelet.Get(ctx, "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-csr-w-1", &got); err != nil {
			t.Fatalf("read the CSR back: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CSR not signed: %+v", got.Status)
		case <-time.After(100 * time.Millisecond): // the pause between two reads
		}
	}
	t.Logf("node CSR approved and signed %s after it was filed", time.Since(start).Round(time.Millisecond))
	if !slices.ContainsFunc(got.Status.Conditions, func(c struct {
		Type string `json:"type"`
	}) bool {
		return c.Type == "Approved"
	}) {
		t.Fatalf("CSR conditions %+v, want Approved", got.Status.Conditions)
	}
	cert, err := pki.ParseCert(got.Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pki.LoadPool(files.CACert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the node certificate does not chain to the cluster CA: %v", err)
	}
	if cert.Subject.CommonName != "system:node:w-1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Fatalf("node certificate subject %v", cert.Subject)
	}
	// The signed certificate is the node's identity: it reads its own Node
	// (absent: 404, not 403).
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(got.Status.Certificate, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	if code := getStatus(t, server+"/api/v1/nodes/w-1", files.CACert, []tls.Certificate{pair}); code != http.StatusNotFound {
		t.Fatalf("the node's certificate reads its Node: %d, want 404", code)
	}

	// An expired token is refused.
	old := kubeapi.Bootstrap{TokenID: "zzzzzz", TokenSecret: "0123456789abcdef", Expires: time.Now().Add(-time.Minute), Group: b.Group}
	if _, err := admin.EnsureBootstrap(ctx, old, ok); err != nil {
		t.Fatal(err)
	}
	ek := &kubeapi.Client{Server: server, HTTP: kubelet.HTTP, Token: "zzzzzz.0123456789abcdef"}
	if err := ek.Get(ctx, "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-csr-w-1", &struct{}{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("an expired token: %v, want 401", err)
	}
}

// testCluster is a control plane startControlPlane runs: its files, its
// server's URL and a client with its admin kubeconfig.
type testCluster struct {
	name   string
	files  kubetest.Files
	server string
	admin  *kubeapi.Client
}

// bootstrapKubeconfig is a kubelet's bootstrap kubeconfig of the cluster
// with tok (the server, the cluster CA, the token).
func (c testCluster) bootstrapKubeconfig(t *testing.T, tok kubepki.BootstrapToken) []byte {
	t.Helper()
	caPEM, err := os.ReadFile(c.files.CACert)
	if err != nil {
		t.Fatal(err)
	}
	bk, err := kubepki.TokenKubeconfig(c.name, c.server, "kubelet-bootstrap", caPEM, tok.String())
	if err != nil {
		t.Fatal(err)
	}
	return bk
}

// startControlPlane runs a control plane of cluster c on a real etcd
// under c's prefix, stopped when the test ends, and returns its files and
// URL.
func startControlPlane(ctx context.Context, t *testing.T, bins kubetest.Binaries, c string) testCluster {
	t.Helper()
	ec := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, ec.Endpoints()...)
	if err := rbac.EnableAuth(ctx, root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	user, prefix := "kube-apiserver:"+c, "/clusters/"+c+"/registry"
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
	cp, err := kubetest.StartControlPlane(ctx, kubetest.ControlPlaneConfig{
		Binaries: bins, Files: files, EtcdServers: ec.Endpoints(), EtcdPrefix: prefix, Port: port, Dir: filepath.Join(dir, "run"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	raw, err := os.ReadFile(files.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubeapi.FromKubeconfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	return testCluster{name: c, files: files, server: server, admin: admin}
}

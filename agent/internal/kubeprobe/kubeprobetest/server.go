// Package kubeprobetest serves a Kubernetes component's HTTPS endpoints
// for tests: a real TLS server on 127.0.0.1 whose certificate a CA made
// for the test signs, and an admin kubeconfig of that CA.
package kubeprobetest

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// Server is a real HTTPS server on 127.0.0.1 with a certificate from a
// CA generated for the test; it checks a client certificate of that CA
// when one is given. It is closed when the test ends.
type Server struct {
	*httptest.Server
	// CA signed the server's certificate (and Kubeconfig's).
	CA *pki.CA
	// CAPEM is CA's certificate, PEM.
	CAPEM []byte
}

// NewServer starts a Server that serves h.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("test-cluster-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue(pki.Request{CommonName: "kube-apiserver", Usage: pki.UsageServer, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	s.StartTLS()
	t.Cleanup(s.Close)
	return &Server{Server: s, CA: ca, CAPEM: ca.CertPEM}
}

// CAFile writes CAPEM to a file of the test's and returns its path.
func (s *Server) CAFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, s.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Kubeconfig is an admin kubeconfig for server (cluster k1, context
// admin@k1): the CA, and a client certificate of kubernetes-admin the CA
// signed.
func (s *Server) Kubeconfig(t testing.TB, server string) []byte {
	t.Helper()
	crt, key, err := s.CA.Issue(pki.Request{CommonName: "kubernetes-admin", Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: admin@k1
clusters:
- name: k1
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: admin@k1
  context: {cluster: k1, user: admin}
`, server, b64(s.CAPEM), b64(crt), b64(key))
}

package ctl

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/coordinator/statuspage"
	"github.com/homystack/nico/pkg/pki"
)

// TestCAViewer: ca viewer issues a client certificate named nico-viewer
// that chains to the machine's CA, with its key 0600, and never
// overwrites; without the CA key it says what to pass.
func TestCAViewer(t *testing.T) {
	d, ca := caMachine(t)
	out := filepath.Join(t.TempDir(), "viewer")
	o := pki.Dir(out)
	run(t, nil, "ca", "viewer", "--out", out, "--pki-dir", string(d)).want(t, 0, []string{`issued "nico-viewer"`, o.Cert("nico-viewer"), "curl --cacert " + d.CACert()}, nil)
	assertPerm(t, o.Key("nico-viewer"))
	pair, err := tls.LoadX509KeyPair(o.Cert("nico-viewer"), o.Key("nico-viewer"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != statuspage.ViewerIdentity {
		t.Errorf("CN %q, want %q", cert.Subject.CommonName, statuspage.ViewerIdentity)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("not a client certificate of the CA: %v", err)
	}
	run(t, nil, "ca", "viewer", "--out", out, "--pki-dir", string(d)).want(t, 2, nil, []string{o.Cert("nico-viewer") + " exists"})
	empty := t.TempDir()
	run(t, nil, "ca", "viewer", "--out", t.TempDir(), "--pki-dir", empty).want(t, 2, nil, []string{"--pki-dir " + empty, "control-plane machine"})
	run(t, nil, "ca", "viewer", "--pki-dir", string(d)).want(t, 2, nil, []string{`--out "" is not accepted`})
}

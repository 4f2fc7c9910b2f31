package pki

import (
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPairFile: a PairFile presents the pair the files hold, read again
// after a renewal, and the last matching pair while the files are mid-swap
// (a certificate with another's key) or gone; a pair that never matched is
// an error naming its files.
func TestPairFile(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	dir := Dir(t.TempDir())
	certFile, keyFile := dir.Cert(NodeLeaf), dir.Key(NodeLeaf)
	req := Request{CommonName: NodeIdentity("n1"), Usage: UsageClient}
	issue := func() (certPEM, keyPEM []byte) {
		t.Helper()
		c, k, err := ca.Issue(req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	serial := func(p *PairFile) string {
		t.Helper()
		c, err := p.Get()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	certSerial := func(certPEM []byte) string {
		c, _ := ParseCert(certPEM)
		return c.SerialNumber.String()
	}

	c1, k1 := issue()
	if err := WritePair(certFile, c1, keyFile, k1); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPairFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(p); got != certSerial(c1) {
		t.Fatalf("presents %s, want the first certificate %s", got, certSerial(c1))
	}

	c2, k2 := issue()
	if err := WriteFile(certFile, c2); err != nil { // mid-swap: the new certificate, the old key
		t.Fatal(err)
	}
	if got := serial(p); got != certSerial(c1) {
		t.Fatalf("mid-swap: presents %s, want the last matching pair's %s", got, certSerial(c1))
	}
	if err := WriteFile(keyFile, k2); err != nil {
		t.Fatal(err)
	}
	if got := serial(p); got != certSerial(c2) {
		t.Fatalf("after the renewal: presents %s, want the new certificate %s", got, certSerial(c2))
	}

	os.Remove(keyFile)
	if got := serial(p); got != certSerial(c2) {
		t.Fatalf("key gone: presents %s, want the last matching pair's %s", got, certSerial(c2))
	}

	if err := WriteFile(keyFile, k1); err != nil { // c2 with k1: never a pair
		t.Fatal(err)
	}
	if _, err := LoadPairFile(certFile, keyFile); err == nil || !strings.Contains(err.Error(), certFile) || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("a mismatched pair loaded first: %v, want an error naming both files", err)
	}
	if _, err := LoadPairFile(dir.Cert("missing"), dir.Key("missing")); err == nil || !strings.Contains(err.Error(), dir.Cert("missing")) {
		t.Fatalf("a missing pair: %v, want an error naming the file", err)
	}
}

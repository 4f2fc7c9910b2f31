package pki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestCA(t *testing.T, cn string) *CA {
	t.Helper()
	ca, err := NewCA(cn, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func verify(c *x509.Certificate, ca *CA, at time.Time, usage x509.ExtKeyUsage) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	other := newTestCA(t, "other-ca")
	cases := []struct {
		name       string
		req        Request
		wantEKU    []x509.ExtKeyUsage
		okClient   bool
		okServer   bool
		wantDNS    []string
		wantIPs    []net.IP
		wantExpire time.Time
	}{
		{
			name:       "client",
			req:        Request{CommonName: NodeIdentity("a"), Usage: UsageClient},
			wantEKU:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			okClient:   true,
			wantExpire: t0.Add(DefaultValidity),
		},
		{
			name:       "server with SANs",
			req:        Request{CommonName: MemberIdentity("m1"), Usage: UsageServer, DNSNames: []string{"localhost", "m1.example"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour},
			wantEKU:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			okServer:   true,
			wantDNS:    []string{"localhost", "m1.example"},
			wantIPs:    []net.IP{net.IPv4(127, 0, 0, 1)},
			wantExpire: t0.Add(time.Hour),
		},
		{
			name:       "peer is both",
			req:        Request{CommonName: MemberIdentity("m1"), Usage: UsagePeer, IPs: []net.IP{net.IPv6loopback}},
			wantEKU:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			okClient:   true,
			okServer:   true,
			wantIPs:    []net.IP{net.IPv6loopback},
			wantExpire: t0.Add(DefaultValidity),
		},
		{
			name:       "never outlives the CA",
			req:        Request{CommonName: RootIdentity, Usage: UsageClient, Validity: 2 * DefaultCAValidity},
			wantEKU:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			okClient:   true,
			wantExpire: ca.Cert.NotAfter,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(tc.req, t0)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseCert(certPEM)
			if err != nil {
				t.Fatal(err)
			}
			key, err := ParseKey(keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			if !keyMatches(c, key) {
				t.Fatal("key does not match the certificate")
			}
			if c.Subject.CommonName != tc.req.CommonName {
				t.Errorf("CN = %q, want %q", c.Subject.CommonName, tc.req.CommonName)
			}
			if !slices.Equal(c.ExtKeyUsage, tc.wantEKU) {
				t.Errorf("EKU = %v, want %v", c.ExtKeyUsage, tc.wantEKU)
			}
			if c.IsCA {
				t.Error("leaf is a CA")
			}
			if c.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("KeyUsage = %v, want DigitalSignature", c.KeyUsage)
			}
			if !slices.Equal(c.DNSNames, tc.wantDNS) {
				t.Errorf("DNSNames = %v, want %v", c.DNSNames, tc.wantDNS)
			}
			if !slices.EqualFunc(c.IPAddresses, tc.wantIPs, net.IP.Equal) {
				t.Errorf("IPs = %v, want %v", c.IPAddresses, tc.wantIPs)
			}
			if want := t0.Add(-time.Minute); !c.NotBefore.Equal(want) {
				t.Errorf("NotBefore = %v, want %v", c.NotBefore, want)
			}
			if !c.NotAfter.Equal(tc.wantExpire) {
				t.Errorf("NotAfter = %v, want %v", c.NotAfter, tc.wantExpire)
			}
			if c.SerialNumber.BitLen() < 64 || c.SerialNumber.BitLen() > 128 {
				t.Errorf("serial has %d bits, want a random 128-bit number", c.SerialNumber.BitLen())
			}
			at := t0.Add(time.Second)
			if err := verify(c, ca, at, x509.ExtKeyUsageClientAuth); (err == nil) != tc.okClient {
				t.Errorf("verify as client: %v, want ok=%v", err, tc.okClient)
			}
			if err := verify(c, ca, at, x509.ExtKeyUsageServerAuth); (err == nil) != tc.okServer {
				t.Errorf("verify as server: %v, want ok=%v", err, tc.okServer)
			}
			if err := verify(c, other, at, x509.ExtKeyUsageAny); err == nil {
				t.Error("a certificate verified against the wrong CA")
			}
			if err := verify(c, ca, c.NotAfter.Add(time.Second), x509.ExtKeyUsageAny); err == nil {
				t.Error("an expired certificate verified")
			}
		})
	}
}

func TestIssueSerialsDiffer(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	seen := map[string]bool{}
	for range 20 {
		certPEM, _, err := ca.Issue(Request{CommonName: "x", Usage: UsageClient}, t0)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := ParseCert(certPEM)
		if seen[c.SerialNumber.String()] {
			t.Fatalf("serial %s issued twice", c.SerialNumber)
		}
		seen[c.SerialNumber.String()] = true
	}
}

func TestBadRequests(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	cases := map[string]Request{
		"no name":           {Usage: UsageClient},
		"no usage":          {CommonName: "x"},
		"unknown usage":     {CommonName: "x", Usage: 1 << 5},
		"negative lifetime": {CommonName: "x", Usage: UsageClient, Validity: -time.Hour},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ca.Issue(req, t0); !errors.Is(err, ErrBadRequest) {
				t.Errorf("Issue: %v, want ErrBadRequest", err)
			}
		})
	}
	if _, err := NewCA("", 0, t0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("NewCA without a name: %v, want ErrBadRequest", err)
	}
}

func TestNewCA(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	c := ca.Cert
	if !c.IsCA || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA flags: IsCA=%v MaxPathLenZero=%v KeyUsage=%v", c.IsCA, c.MaxPathLenZero, c.KeyUsage)
	}
	if got, want := c.NotAfter, t0.Add(DefaultCAValidity); !got.Equal(want) {
		t.Errorf("NotAfter = %v, want %v", got, want)
	}
	if c.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", c.PublicKeyAlgorithm)
	}
	parsed, err := ParseCert(ca.CertPEM)
	if err != nil || !parsed.Equal(c) {
		t.Errorf("CertPEM does not hold Cert: %v", err)
	}
}

func TestSignCSROverridesForgedSubject(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	// The joining machine asks to be root, with a SAN of its choosing.
	csrPEM, keyPEM, err := NewCSR(RootIdentity)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{CommonName: NodeIdentity("n1"), Usage: UsageClient}
	certPEM, err := ca.SignCSR(csrPEM, req, t0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != NodeIdentity("n1") {
		t.Errorf("CN = %q, want %q (the signer's, not the CSR's)", c.Subject.CommonName, NodeIdentity("n1"))
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !keyMatches(c, key) {
		t.Error("signed certificate is not for the CSR's key")
	}
	if err := verify(c, ca, t0, x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("verify: %v", err)
	}
	if err := verify(c, ca, t0, x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("a client certificate verified as a server")
	}
}

func TestBadPEM(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	csrPEM, keyPEM, err := NewCSR("x")
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(csrPEM)
	// Flip a byte inside the base64 body (past the header line).
	i := bytes.IndexByte(tampered, '\n') + 40
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	req := Request{CommonName: "x", Usage: UsageClient}
	cases := []struct {
		name string
		run  func() error
	}{
		{"cert: garbage", func() error { _, err := ParseCert([]byte("not pem")); return err }},
		{"cert: empty", func() error { _, err := ParseCert(nil); return err }},
		{"cert: a key block", func() error { _, err := ParseCert(keyPEM); return err }},
		{"cert: bad DER", func() error { _, err := ParseCert(pemEncode(pemCertificate, []byte{1, 2, 3})); return err }},
		{"key: garbage", func() error { _, err := ParseKey([]byte("-----BEGIN NOPE")); return err }},
		{"key: a cert block", func() error { _, err := ParseKey(ca.CertPEM); return err }},
		{"key: bad DER", func() error { _, err := ParseKey(pemEncode(pemPrivateKey, []byte{1, 2, 3})); return err }},
		{"csr: garbage", func() error { _, err := ca.SignCSR([]byte("junk"), req, t0); return err }},
		{"csr: a cert block", func() error { _, err := ca.SignCSR(ca.CertPEM, req, t0); return err }},
		{"csr: tampered", func() error { _, err := ca.SignCSR(tampered, req, t0); return err }},
		{"renewal: garbage", func() error { _, err := NeedsRenewal([]byte("junk"), t0); return err }},
		{"CA: garbage key", func() error { _, err := ParseCA(ca.CertPEM, []byte("junk")); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if !errors.Is(err, ErrBadPEM) {
				t.Fatalf("error %v, want ErrBadPEM", err)
			}
			if bytes.Contains([]byte(err.Error()), keyPEM[30:60]) {
				t.Error("error message contains key material")
			}
		})
	}
}

func TestCASaveLoad(t *testing.T) {
	dir := Dir(filepath.Join(t.TempDir(), "pki"))
	ca := newTestCA(t, "nico-ca")
	if err := ca.Save(dir.CACert(), dir.CAKey()); err != nil {
		t.Fatal(err)
	}
	assertMode(t, string(dir), 0o700)
	assertMode(t, dir.CACert(), 0o600)
	assertMode(t, dir.CAKey(), 0o600)
	loaded, err := LoadCA(dir.CACert(), dir.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) || !bytes.Equal(loaded.CertPEM, ca.CertPEM) {
		t.Error("loaded CA differs")
	}
	// The loaded CA issues leaves the original's pool verifies.
	certPEM, _, err := loaded.Issue(Request{CommonName: "x", Usage: UsageClient}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ParseCert(certPEM)
	if err := verify(c, ca, t0, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}

	// A bundle (CA rotation): the certificate matching the key is the CA.
	other := newTestCA(t, "other-ca")
	bundle := append(bytes.Clone(other.CertPEM), ca.CertPEM...)
	if err := WriteFile(dir.CACert(), bundle); err != nil {
		t.Fatal(err)
	}
	loaded, err = LoadCA(dir.CACert(), dir.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Error("bundle: loaded the wrong CA")
	}

	// The other CA's certificate with this key is refused.
	if err := WriteFile(dir.CACert(), other.CertPEM); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir.CACert(), dir.CAKey()); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("mismatched key: %v, want ErrKeyMismatch", err)
	}
	if _, err := LoadCA(filepath.Join(string(dir), "missing"), dir.CAKey()); err == nil {
		t.Error("missing file loaded")
	}
}

package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// issueFiles issues req and writes it as leaf name under dir.
func issueFiles(t *testing.T, ca *CA, dir Dir, name string, req Request) *big.Int {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir.Key(name), keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir.Cert(name), certPEM); err != nil {
		t.Fatal(err)
	}
	c, _ := ParseCert(certPEM)
	return c.SerialNumber
}

// serve accepts TLS connections and reports each client's leaf serial (nil
// when the handshake failed).
func serve(t *testing.T, cfg *tls.Config) (addr string, serials <-chan *big.Int) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan *big.Int, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			var serial *big.Int
			if err := tc.Handshake(); err == nil {
				if pcs := tc.ConnectionState().PeerCertificates; len(pcs) > 0 {
					serial = pcs[0].SerialNumber
				}
			}
			tc.Close()
			ch <- serial
		}
	}()
	return ln.Addr().String(), ch
}

// dial handshakes with addr and returns the server's leaf serial and the
// serial the server saw from us.
func dial(t *testing.T, addr string, cfg *tls.Config, seen <-chan *big.Int) (server, client *big.Int, err error) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err == nil {
		err = conn.Handshake()
	}
	if err == nil {
		// TLS 1.3: the server's verdict on our certificate arrives with the
		// first read.
		_, err = conn.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			err = nil // the server closed after a good handshake
		}
		server = conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
	}
	select {
	case client = <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("server saw no connection")
	}
	return server, client, err
}

func TestTLSConfigsReloadKeyPairPerHandshake(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	dir := Dir(filepath.Join(t.TempDir(), "pki"))
	if err := WriteFile(dir.CACert(), ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	serverReq := Request{CommonName: MemberIdentity("m1"), Usage: UsageServer, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	clientReq := Request{CommonName: RootIdentity, Usage: UsageClient}
	s1 := issueFiles(t, ca, dir, "server", serverReq)
	c1 := issueFiles(t, ca, dir, "client", clientReq)

	scfg, err := ServerTLS(dir.CACert(), dir.Cert("server"), dir.Key("server"), true)
	if err != nil {
		t.Fatal(err)
	}
	ccfg, err := ClientTLS(dir.CACert(), dir.Cert("client"), dir.Key("client"))
	if err != nil {
		t.Fatal(err)
	}
	addr, seen := serve(t, scfg)

	gotS, gotC, err := dial(t, addr, ccfg, seen)
	if err != nil {
		t.Fatal(err)
	}
	if gotS.Cmp(s1) != 0 || gotC == nil || gotC.Cmp(c1) != 0 {
		t.Fatalf("serials server=%v client=%v, want %v and %v", gotS, gotC, s1, c1)
	}

	// Renew both on disk; the same configs present the new pairs.
	s2 := issueFiles(t, ca, dir, "server", serverReq)
	c2 := issueFiles(t, ca, dir, "client", clientReq)
	gotS, gotC, err = dial(t, addr, ccfg, seen)
	if err != nil {
		t.Fatal(err)
	}
	if gotS.Cmp(s2) != 0 || gotC == nil || gotC.Cmp(c2) != 0 {
		t.Fatalf("after renewal: serials server=%v client=%v, want %v and %v", gotS, gotC, s2, c2)
	}

	// A client without a certificate is refused.
	bare := &tls.Config{RootCAs: ccfg.RootCAs, MinVersion: tls.VersionTLS12}
	if _, gotC, err = dial(t, addr, bare, seen); err == nil || gotC != nil {
		t.Errorf("client without a certificate: err=%v, server saw %v; want refused", err, gotC)
	}

	// A client with a certificate from another CA is refused.
	other := newTestCA(t, "other-ca")
	odir := Dir(filepath.Join(t.TempDir(), "pki"))
	if err := WriteFile(odir.CACert(), ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	issueFiles(t, other, odir, "client", clientReq)
	ocfg, err := ClientTLS(odir.CACert(), odir.Cert("client"), odir.Key("client"))
	if err != nil {
		t.Fatal(err)
	}
	if _, gotC, err = dial(t, addr, ocfg, seen); err == nil || gotC != nil {
		t.Errorf("client from another CA: err=%v, server saw %v; want refused", err, gotC)
	}

	// Missing files fail at build time.
	if _, err := ClientTLS(dir.CACert(), dir.Cert("nope"), dir.Key("nope")); err == nil {
		t.Error("ClientTLS with a missing pair succeeded")
	}
	if _, err := ServerTLS(filepath.Join(string(dir), "no-ca"), dir.Cert("server"), dir.Key("server"), true); err == nil {
		t.Error("ServerTLS with a missing CA succeeded")
	}
}

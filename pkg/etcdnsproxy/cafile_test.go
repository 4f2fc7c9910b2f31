package etcdnsproxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdnsproxy"
	"github.com/homystack/nico/pkg/pki"
)

// handshake runs one TLS handshake over loopback TCP and returns the
// client's and the server's errors.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		b, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		s := tls.Server(b, server)
		err = s.Handshake()
		s.Close()
		done <- err
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(a, client)
	cerr = c.Handshake()
	c.Close()
	return cerr, <-done
}

// TestFilesReloadRotatedCA: when nico rotates its CA and delivers a bundle
// of the old and the new CA to the same paths, the next handshake trusts
// the new CA on both sides, with no restart: an etcd server whose
// certificate the new CA issued, and a client whose certificate it issued.
func TestFilesReloadRotatedCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	oldCA, err := pki.NewCA("old", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("new", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := pki.WriteFile(p, data); err != nil {
			t.Fatal(err)
		}
		// Past the file system's time granularity, as a later delivery.
		later := now.Add(time.Duration(len(data)) * time.Second)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pair := func(ca *pki.CA, cn string, usage pki.Usage) tls.Certificate {
		t.Helper()
		c, k, err := ca.Issue(pki.Request{CommonName: cn, Usage: usage, DNSNames: []string{"localhost"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := func(ca *pki.CA, base string, usage pki.Usage) (string, string) {
		t.Helper()
		c, k, err := ca.Issue(pki.Request{CommonName: base, Usage: usage, DNSNames: []string{"localhost"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		return write(base+".crt", c), write(base+".key", k)
	}
	f := etcdnsproxy.Files{EtcdCA: write("etcd-ca.crt", oldCA.CertPEM), ClientCA: write("client-ca.crt", oldCA.CertPEM)}
	f.Cert, f.Key = files(oldCA, "id", pki.UsageClient)
	f.ServingCert, f.ServingKey = files(oldCA, "serving", pki.UsageServer)
	backend, server, err := f.TLS()
	if err != nil {
		t.Fatal(err)
	}
	// etcd, its serving certificate from the new CA.
	etcd := &tls.Config{Certificates: []tls.Certificate{pair(newCA, "etcd", pki.UsageServer)}}
	dialEtcd := func(name string) error {
		c := backend.Clone()
		c.ServerName = name
		cerr, _ := handshake(t, c, etcd)
		return cerr
	}
	// A client, its certificate from the new CA; it trusts the proxy's
	// serving certificate.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(oldCA.CertPEM)
	client := &tls.Config{ServerName: "localhost", RootCAs: roots, Certificates: []tls.Certificate{pair(newCA, "kubernetes:a", pki.UsageClient)}}
	// As New asks for the client's certificate.
	listener := server.Clone()
	listener.ClientAuth = tls.RequireAndVerifyClientCert
	serve := func() error {
		_, serr := handshake(t, client, listener)
		return serr
	}
	if err := dialEtcd("localhost"); err == nil {
		t.Fatal("an etcd server from a CA not yet delivered was trusted")
	}
	if err := serve(); err == nil {
		t.Fatal("a client from a CA not yet delivered was accepted")
	}
	bundle, err := pki.AppendCA(oldCA.CertPEM, newCA.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	write("etcd-ca.crt", bundle)
	write("client-ca.crt", bundle)
	if err := dialEtcd("localhost"); err != nil {
		t.Fatalf("etcd from the rotated CA: %v", err)
	}
	if err := serve(); err != nil {
		t.Fatalf("a client from the rotated CA: %v", err)
	}
	if err := dialEtcd("etcd.example"); err == nil {
		t.Fatal("an etcd certificate for another name was trusted")
	}
	// Half-written bundle: the one that worked stays.
	write("etcd-ca.crt", []byte("-----BEGIN CERT"))
	if err := dialEtcd("localhost"); err != nil {
		t.Fatalf("after a half-written bundle: %v", err)
	}
}

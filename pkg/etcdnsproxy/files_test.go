package etcdnsproxy_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdnsproxy"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
)

// TestFilesReloadRenewedPairs: when nico delivers a renewed certificate
// and key to the same paths, the next handshake presents the new pair,
// on both sides; a pair half-written keeps the previous one.
func TestFilesReloadRenewedPairs(t *testing.T) {
	dir := t.TempDir()
	ca := etcdtest.PKI(t)
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := pki.WriteFile(p, data); err != nil {
			t.Fatal(err)
		}
		return p
	}
	issue := func(cn string, usage pki.Usage) ([]byte, []byte) {
		t.Helper()
		c, k, err := ca.Issue(pki.Request{CommonName: cn, Usage: usage, DNSNames: []string{"localhost"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	idCert, idKey := issue("kubernetes:a", pki.UsageClient)
	svCert, svKey := issue("proxy", pki.UsageServer)
	f := etcdnsproxy.Files{EtcdCA: write("ca.crt", ca.CertPEM), ClientCA: filepath.Join(dir, "ca.crt"),
		Cert: write("id.crt", idCert), Key: write("id.key", idKey), ServingCert: write("sv.crt", svCert), ServingKey: write("sv.key", svKey)}
	backend, server, err := f.TLS()
	if err != nil {
		t.Fatal(err)
	}
	serial := func(get func() ([]byte, error)) string {
		t.Helper()
		der, err := get()
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.String()
	}
	client := func() ([]byte, error) {
		c, err := backend.GetClientCertificate(nil)
		if err != nil {
			return nil, err
		}
		return c.Certificate[0], nil
	}
	serving := func() ([]byte, error) {
		c, err := server.GetCertificate(nil)
		if err != nil {
			return nil, err
		}
		return c.Certificate[0], nil
	}
	id0, sv0 := serial(client), serial(serving)
	if serial(client) != id0 || serial(serving) != sv0 {
		t.Fatal("the pairs changed with no file changed")
	}
	idCert2, idKey2 := issue("kubernetes:a", pki.UsageClient)
	// Only the certificate renewed so far: the old pair stays.
	write("id.crt", idCert2)
	if got := serial(client); got != id0 {
		t.Fatalf("half-written pair: serial %s, want the old %s", got, id0)
	}
	write("id.key", idKey2)
	svCert2, svKey2 := issue("proxy", pki.UsageServer)
	write("sv.crt", svCert2)
	write("sv.key", svKey2)
	// A file's time may not move within the file system's granularity;
	// its size does for a new key pair most of the time, and touching
	// it forward settles it.
	later := time.Now().Add(2 * time.Second)
	for _, n := range []string{"id.crt", "id.key", "sv.crt", "sv.key"} {
		if err := os.Chtimes(filepath.Join(dir, n), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := serial(client); got == id0 {
		t.Fatal("the renewed client pair was not read")
	}
	if got := serial(serving); got == sv0 {
		t.Fatal("the renewed serving pair was not read")
	}
}

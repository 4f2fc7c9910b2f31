package agent

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
)

type quietNotifier struct{}

func (quietNotifier) Ready() error        { return nil }
func (quietNotifier) Status(string) error { return nil }
func (quietNotifier) Stopping() error     { return nil }

// allPKI is ensurePKI and the leaves it issues alongside (leaves.wait).
func allPKI(ctx context.Context, a *Agent) error {
	if err := a.ensurePKI(ctx); err != nil {
		return err
	}
	return a.leaves.wait(ctx)
}

// pkiAgent is an agent whose only job in these tests is ensurePKI.
func pkiAgent(t *testing.T, dir string, roles []api.Role, bootstrap bool) *Agent {
	return New(Config{
		Name: "cp-1", Roles: roles, Bootstrap: bootstrap,
		PeerURL: "https://10.1.2.3:2380", ClientURL: "https://cp-1.lan:2379",
		PKI: PKIConfig{Dir: pki.Dir(dir)},
	}, nil, quietNotifier{}, logging.Test(t))
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantPrivate fails unless path is mode 0600.
func wantPrivate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s is %v, want 0600", path, fi.Mode().Perm())
	}
}

func TestBootstrapMakesCAAndEveryCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	a := pkiAgent(t, dir, []api.Role{api.RoleControlPlane}, true)
	if err := allPKI(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if a.tls == nil {
		t.Fatal("no client TLS")
	}
	d := pki.Dir(dir)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("pki dir: %v %v, want 0700", fi.Mode().Perm(), err)
	}
	key, err := os.ReadFile(d.SecretsKey())
	if err != nil || len(key) != 32 {
		t.Fatalf("secrets.key: %d bytes, %v; want 32", len(key), err)
	}
	for _, f := range []string{d.CACert(), d.CAKey(), d.SecretsKey()} {
		wantPrivate(t, f)
	}
	ca, err := pki.LoadCA(d.CACert(), d.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		cn    string
		usage []x509.ExtKeyUsage
	}{
		certNode:        {"node:cp-1", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		certEtcdServer:  {"etcd:cp-1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		certEtcdPeer:    {"etcd:cp-1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		certCoordinator: {"nico-coordinator", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		certRoot:        {"root", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	}
	for name, w := range want {
		c := readCert(t, d.Cert(name))
		wantPrivate(t, d.Cert(name))
		wantPrivate(t, d.Key(name))
		if c.Subject.CommonName != w.cn || !slices.Equal(c.ExtKeyUsage, w.usage) {
			t.Errorf("%s: CN %q usage %v, want %q %v", name, c.Subject.CommonName, c.ExtKeyUsage, w.cn, w.usage)
		}
		if err := c.CheckSignatureFrom(ca.Cert); err != nil {
			t.Errorf("%s not signed by the CA: %v", name, err)
		}
	}
	peer := readCert(t, d.Cert(certEtcdPeer))
	if len(peer.IPAddresses) != 3 || !peer.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) || !peer.IPAddresses[1].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("etcd-peer IP SANs %v, want the peer URL's 10.1.2.3 and loopback", peer.IPAddresses)
	}
	server := readCert(t, d.Cert(certEtcdServer))
	if !slices.Contains(server.DNSNames, "cp-1.lan") || !slices.Contains(server.DNSNames, "localhost") {
		t.Errorf("etcd-server DNS SANs %v, want the client URL's cp-1.lan and localhost", server.DNSNames)
	}

	// A restart changes nothing: the CA and the leaves stay.
	before, _ := os.ReadFile(d.Cert(certEtcdPeer))
	if err := allPKI(context.Background(), pkiAgent(t, dir, []api.Role{api.RoleControlPlane}, true)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(d.Cert(certEtcdPeer)); !bytes.Equal(before, after) {
		t.Error("a restart re-issued a certificate that was not due")
	}
}

func TestBootstrapUsesTheGivenCA(t *testing.T) {
	src := t.TempDir()
	ca, err := pki.NewCA("my CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(src, "ca.crt"), filepath.Join(src, "ca.key")
	if err := ca.Save(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	a := pkiAgent(t, dir, []api.Role{api.RoleControlPlane}, true)
	a.cfg.PKI.CACertFile, a.cfg.PKI.CAKeyFile = certFile, keyFile
	if err := allPKI(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(pki.Dir(dir).CACert())
	if !bytes.Equal(got, ca.CertPEM) {
		t.Error("ca.crt is not the given CA")
	}
	if err := readCert(t, pki.Dir(dir).Cert(certNode)).CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("node certificate not from the given CA: %v", err)
	}
}

func TestNoCertificatesWithoutJoinOrBootstrap(t *testing.T) {
	for _, roles := range [][]api.Role{{api.RoleWorker}, {api.RoleControlPlane}} {
		a := pkiAgent(t, t.TempDir(), roles, false)
		if err := a.ensurePKI(context.Background()); !errors.Is(err, ErrNoCertificates) {
			t.Errorf("%v: ensurePKI = %v, want ErrNoCertificates", roles, err)
		}
	}
}

// TestObtainedCertificates: a worker gets ca.crt and its node pair from
// ObtainCerts and issues nothing; a control-plane machine that got ca.key
// too issues its own etcd certificates.
func TestObtainedCertificates(t *testing.T) {
	ca, err := pki.NewCA("fleet", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	obtain := func(withKey bool) ObtainCertsFunc {
		return func(_ context.Context, d pki.Dir) error {
			cert, key, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}, time.Now())
			if err != nil {
				return err
			}
			if err := pki.WriteFile(d.Cert(certNode), cert); err != nil {
				return err
			}
			if err := pki.WriteFile(d.Key(certNode), key); err != nil {
				return err
			}
			if withKey {
				return ca.Save(d.CACert(), d.CAKey())
			}
			return pki.WriteFile(d.CACert(), ca.CertPEM)
		}
	}
	dir := t.TempDir()
	w := pkiAgent(t, dir, []api.Role{api.RoleWorker}, false)
	w.ObtainCerts = obtain(false)
	if err := w.ensurePKI(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exists(pki.Dir(dir).Cert(certEtcdPeer)) || w.tls == nil {
		t.Error("a worker issued an etcd certificate, or has no client TLS")
	}

	dir = t.TempDir()
	cp := pkiAgent(t, dir, []api.Role{api.RoleControlPlane}, false)
	cp.ObtainCerts = obtain(true)
	if err := allPKI(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if c := readCert(t, pki.Dir(dir).Cert(certEtcdPeer)); c.Subject.CommonName != "etcd:cp-1" {
		t.Errorf("etcd-peer CN %q", c.Subject.CommonName)
	}

	failing := pkiAgent(t, t.TempDir(), []api.Role{api.RoleWorker}, false)
	failing.ObtainCerts = func(context.Context, pki.Dir) error { return errors.New("token revoked") }
	if err := failing.ensurePKI(context.Background()); err == nil {
		t.Error("a failed join is not an error")
	}
}

// A renewal cut short after its new key was put in place leaves a
// certificate with another's key; the agent's next start finishes the
// write (pki.RecoverPair) instead of failing to load its identity.
func TestEnsureFinishesAnInterruptedRenewal(t *testing.T) {
	ca, err := pki.NewCA("fleet", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := pki.Dir(t.TempDir())
	issue := func() (cert, key []byte) {
		cert, key, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	oldCert, oldKey := issue()
	if err := pki.WritePair(d.Cert(certNode), oldCert, d.Key(certNode), oldKey); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(d.CACert(), ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	// What WritePair leaves when it stops after the key's rename.
	newCert, newKey := issue()
	if err := pki.WriteFile(filepath.Join(string(d), "."+filepath.Base(d.Cert(certNode))+".next"), newCert); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(d.Key(certNode), newKey); err != nil {
		t.Fatal(err)
	}
	w := pkiAgent(t, string(d), []api.Role{api.RoleWorker}, false)
	if err := w.ensurePKI(context.Background()); err != nil {
		t.Fatalf("start after an interrupted renewal: %v", err)
	}
	if got, _ := os.ReadFile(d.Cert(certNode)); !bytes.Equal(got, newCert) {
		t.Error("the renewal's certificate is not in place")
	}
}

// TestRenewal: certificates with less than a third of their lifetime left,
// or expired, are renewed for the key they have (so etcd, loading the pair
// on each handshake, never reads a certificate with another's key); others
// are left alone.
func TestRenewal(t *testing.T) {
	dir := t.TempDir()
	d := pki.Dir(dir)
	a := pkiAgent(t, dir, []api.Role{api.RoleControlPlane}, true)
	if err := allPKI(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	for _, later := range []time.Duration{100 * 24 * time.Hour, 250 * 24 * time.Hour, 500 * 24 * time.Hour} {
		now := time.Now().Add(later)
		oldKey, _ := os.ReadFile(d.Key(certEtcdServer))
		old := readCert(t, d.Cert(certEtcdServer))
		a.Now = func() time.Time { return now }
		if err := a.leafIssuer().pass(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		renewed := readCert(t, d.Cert(certEtcdServer))
		newKey, _ := os.ReadFile(d.Key(certEtcdServer))
		due := old.NotAfter.Sub(now)*3 < old.NotAfter.Sub(old.NotBefore)
		if !due {
			if !renewed.Equal(old) {
				t.Errorf("+%s: renewed a certificate not due", later)
			}
			continue
		}
		if renewed.Equal(old) || !renewed.NotAfter.After(now) {
			t.Errorf("+%s: not renewed (notAfter %s)", later, renewed.NotAfter)
		}
		if !bytes.Equal(oldKey, newKey) {
			t.Errorf("+%s: renewal replaced the key", later)
		}
		if !slices.Equal(renewed.DNSNames, old.DNSNames) || renewed.Subject.CommonName != old.Subject.CommonName {
			t.Errorf("+%s: renewed certificate says %q %v, was %q %v", later, renewed.Subject.CommonName, renewed.DNSNames, old.Subject.CommonName, old.DNSNames)
		}
	}
}

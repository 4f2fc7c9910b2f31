package etcdtest

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// TLSDefault is THE switch that puts every test on TLS: when true, URLs
// returns https URLs, Start runs its members with certificates from PKI(t)
// and client and peer certificate authentication, and MemberTLS gives a
// member.Config the files it needs. NewClient follows the endpoints' scheme
// whatever TLSDefault says. StartWith and URLsFor choose explicitly.
// NICO_ETCDTEST_TLS=1 (or 0) overrides it for a trial run.
var TLSDefault = tlsDefault(true)

// EnvTLS overrides TLSDefault: "1" or "true" turns TLS on, "0" or "false" off.
const EnvTLS = "NICO_ETCDTEST_TLS"

func tlsDefault(def bool) bool {
	if v, err := strconv.ParseBool(os.Getenv(EnvTLS)); err == nil {
		return v
	}
	return def
}

// The per-test-binary CA: made once, kept in memory; files are written
// into each test's own directories by IssueFiles.
var (
	caOnce sync.Once
	ca     *pki.CA
	caErr  error
)

// PKI returns this test binary's cluster CA, made on first use.
func PKI(t testing.TB) *pki.CA {
	t.Helper()
	caOnce.Do(func() { ca, caErr = pki.NewCA("etcdtest-ca", 0, time.Now()) })
	if caErr != nil {
		t.Fatalf("etcdtest: CA: %v", caErr)
	}
	return ca
}

// Files are the paths IssueFiles wrote.
type Files struct {
	CA   string // the CA certificate (dir/ca.crt)
	Cert string
	Key  string
}

// IssueFiles issues req from PKI(t) and writes dir/ca.crt and the pair as
// dir/<CN>.crt and .key (":" in the CN becomes "-"), 0600 in a 0700 dir.
func IssueFiles(t testing.TB, dir string, req pki.Request) Files {
	t.Helper()
	c := PKI(t)
	certPEM, keyPEM, err := c.Issue(req, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: issue %q: %v", req.CommonName, err)
	}
	d := pki.Dir(dir)
	name := strings.NewReplacer(":", "-", "/", "-").Replace(req.CommonName)
	f := Files{CA: d.CACert(), Cert: d.Cert(name), Key: d.Key(name)}
	for path, data := range map[string][]byte{f.CA: c.CertPEM, f.Key: keyPEM, f.Cert: certPEM} {
		if err := pki.WriteFile(path, data); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	return f
}

// ClientTLS returns a client tls.Config presenting a fresh certificate for
// commonName (an etcd user: pki.RootIdentity, pki.NodeIdentity(...)) and
// trusting PKI(t).
func ClientTLS(t testing.TB, commonName string) *tls.Config {
	t.Helper()
	c := PKI(t)
	certPEM, keyPEM, err := c.Issue(pki.Request{CommonName: commonName, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: issue %q: %v", commonName, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.Pool(), Certificates: []tls.Certificate{pair}}
}

// rootTLS is the root client identity NewClient presents, made once.
var (
	rootOnce sync.Once
	rootCfg  *tls.Config
)

func rootTLS(t testing.TB) *tls.Config {
	t.Helper()
	rootOnce.Do(func() { rootCfg = ClientTLS(t, pki.RootIdentity) })
	return rootCfg.Clone()
}

// MemberTLS issues member name's server and peer certificates from PKI(t)
// into a directory of the test, with SANs for the URLs' hosts (and
// localhost, 127.0.0.1), and returns the member.TLS for them with client
// and peer certificate authentication on. It returns nil when both URLs
// are http, so a test can always write cfg.TLS = MemberTLS(...).
func MemberTLS(t testing.TB, name, peerURL, clientURL string) *member.TLS {
	t.Helper()
	pu, err := url.Parse(peerURL)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	if pu.Scheme != "https" && cu.Scheme != "https" {
		return nil
	}
	dir := filepath.Join(t.TempDir(), "pki")
	server := IssueFiles(t, filepath.Join(dir, "server"), pki.Request{
		CommonName: pki.MemberIdentity(name), Usage: pki.UsageServer,
		DNSNames: dnsSANs(cu.Hostname()), IPs: ipSANs(cu.Hostname()),
	})
	peer := IssueFiles(t, filepath.Join(dir, "peer"), pki.Request{
		CommonName: pki.MemberIdentity(name), Usage: pki.UsagePeer,
		DNSNames: dnsSANs(pu.Hostname()), IPs: ipSANs(pu.Hostname()),
	})
	return &member.TLS{
		TrustedCAFile:      server.CA,
		ServerCertFile:     server.Cert,
		ServerKeyFile:      server.Key,
		PeerCertFile:       peer.Cert,
		PeerKeyFile:        peer.Key,
		ClientCertAuth:     true,
		PeerClientCertAuth: true,
	}
}

func dnsSANs(host string) []string {
	if net.ParseIP(host) != nil || host == "localhost" {
		return []string{"localhost"}
	}
	return []string{"localhost", host}
}

func ipSANs(host string) []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if ip := net.ParseIP(host); ip != nil && !ip.Equal(ips[0]) {
		ips = append(ips, ip)
	}
	return ips
}

// applyTLS sets an embed config's client and peer TLS from t (nil: none).
func applyTLS(cfg *embed.Config, t *member.TLS) {
	if t == nil {
		return
	}
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.ServerCertFile, KeyFile: t.ServerKeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: t.PeerCertFile, KeyFile: t.PeerKeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.PeerClientCertAuth}
}

func scheme(useTLS bool) string {
	if useTLS {
		return "https"
	}
	return "http"
}

// URLsFor returns a fresh peer and client URL pair on loopback, https when
// useTLS.
func URLsFor(t testing.TB, useTLS bool) (peer, client string) {
	s := scheme(useTLS)
	return fmt.Sprintf("%s://127.0.0.1:%d", s, FreePort(t)), fmt.Sprintf("%s://127.0.0.1:%d", s, FreePort(t))
}

func anyHTTPS(endpoints []string) bool {
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "https://") {
			return true
		}
	}
	return false
}

// ForeignCertificate returns a client certificate for commonName issued
// by a CA of its own, one that PKI(t) does not trust: what a caller with
// the right name but from another fleet presents.
func ForeignCertificate(t testing.TB, commonName string) tls.Certificate {
	t.Helper()
	other, err := pki.NewCA("another CA", 0, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	certPEM, keyPEM, err := other.Issue(pki.Request{CommonName: commonName, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: issue %q: %v", commonName, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return pair
}

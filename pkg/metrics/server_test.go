package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
)

// TestBeyondLoopbackNeedsClientCertificates: a server bound beyond loopback
// refuses to start without TLS requiring client certificates, and once
// started with it, answers neither /metrics nor pprof to a client without
// a certificate or with one of another CA, and answers one of the CA.
func TestBeyondLoopbackNeedsClientCertificates(t *testing.T) {
	reg := NewRegistry()
	NewCoordinator(reg).Leading(true)
	for _, cfg := range []*tls.Config{nil, {}} {
		s := &Server{Listen: "0.0.0.0:0", TLS: cfg, Registry: reg}
		if err := s.Bind(); !errors.Is(err, ErrNeedsTLS) {
			t.Fatalf("Bind on 0.0.0.0 with TLS %v: %v, want ErrNeedsTLS", cfg, err)
		}
	}
	dir := t.TempDir()
	srvFiles := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: "metrics", Usage: pki.UsageServer, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	tlsCfg, err := pki.ServerTLS(srvFiles.CA, srvFiles.Cert, srvFiles.Key, true)
	if err != nil {
		t.Fatal(err)
	}
	// Bound on every address (not loopback), reached only through 127.0.0.1.
	s := &Server{Listen: "0.0.0.0:0", TLS: tlsCfg, Registry: reg}
	stop, err := s.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, port, _ := net.SplitHostPort(s.Addr())
	base := "https://127.0.0.1:" + port
	pool, err := pki.LoadPool(srvFiles.CA)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := other.Issue(pki.Request{CommonName: "scraper", Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherPair, err := tls.X509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	good := etcdtest.IssueFiles(t, filepath.Join(dir, "scraper"), pki.Request{CommonName: "scraper", Usage: pki.UsageClient})
	goodPair, err := tls.LoadX509KeyPair(good.Cert, good.Key)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, certs ...tls.Certificate) (string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", errors.New(resp.Status)
		}
		return string(b), err
	}
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if _, err := get(path); err == nil {
			t.Errorf("%s without a client certificate answered", path)
		}
		if _, err := get(path, otherPair); err == nil {
			t.Errorf("%s with a certificate of another CA answered", path)
		}
		body, err := get(path, goodPair)
		if err != nil {
			t.Fatalf("%s with the CA's certificate: %v", path, err)
		}
		if path == "/metrics" && !strings.Contains(body, "nico_coordinator_is_leader 1") {
			t.Errorf("/metrics lacks nico_coordinator_is_leader 1:\n%s", body)
		}
	}
}

// TestLoopbackServesPlainHTTP: on loopback, /metrics and pprof answer
// plain HTTP, and Start on an address in use logs and serves nothing
// rather than failing the program.
func TestLoopbackServesPlainHTTP(t *testing.T) {
	reg := NewRegistry()
	NewAgent(reg, "n-1").Generation(GenerationApplied)
	s := &Server{Listen: "127.0.0.1:0", Registry: reg}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, path := range []string{"/metrics", "/debug/pprof/cmdline"} {
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		if path == "/metrics" && !strings.Contains(string(b), `nico_agent_generations_total{node="n-1",outcome="applied"} 1`) {
			t.Errorf("/metrics lacks the applied generation:\n%s", b)
		}
	}
	busy := &Server{Listen: s.Addr(), Registry: reg, Log: logging.Test(t)}
	stop2, err := busy.Start(ctx)
	if err != nil {
		t.Fatalf("Start on an address in use: %v, want logged and nothing served", err)
	}
	stop2()
}

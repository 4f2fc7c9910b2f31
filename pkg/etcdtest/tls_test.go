package etcdtest

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestStartWithTLS(t *testing.T) {
	c := StartWith(t, Options{Members: 3, TLS: true})
	for _, m := range c.Members {
		if !strings.HasPrefix(m.ClientURL, "https://") || !strings.HasPrefix(m.PeerURL, "https://") || m.TLS == nil {
			t.Fatalf("member %s: %s %s TLS=%v, want https with files", m.Name, m.ClientURL, m.PeerURL, m.TLS)
		}
		if !m.TLS.ClientCertAuth || !m.TLS.PeerClientCertAuth {
			t.Errorf("member %s: client/peer cert auth off", m.Name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.MemberList(ctx)
	if err != nil || len(resp.Members) != 3 {
		t.Fatalf("MemberList = %v, %v; want 3 members", resp, err)
	}

	// Another identity from the same CA is served too.
	node, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: ClientTLS(t, pki.NodeIdentity("n1")), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := node.Get(ctx, "k"); err != nil {
		t.Fatalf("Get as node:n1: %v", err)
	}
}

func TestIssueFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	f := IssueFiles(t, dir, pki.Request{CommonName: pki.NodeIdentity("n1"), Usage: pki.UsageClient})
	if f.Cert != filepath.Join(dir, "node-n1.crt") || f.Key != filepath.Join(dir, "node-n1.key") || f.CA != filepath.Join(dir, "ca.crt") {
		t.Errorf("files %+v", f)
	}
	for _, p := range []string{f.CA, f.Cert, f.Key} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", p, err, fi.Mode())
		}
	}
	data, err := os.ReadFile(f.Cert)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: PKI(t).Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("issued certificate does not chain to PKI(t): %v", err)
	}
	if first, second := PKI(t), PKI(t); first != second {
		t.Error("PKI(t) is not one CA per test binary")
	}
	if MemberTLS(t, "m", "http://127.0.0.1:1", "http://127.0.0.1:2") != nil {
		t.Error("MemberTLS for http URLs is not nil")
	}
}

func TestFreePortBelowEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if lo := ephemeralLow(); lo-lowestPort > 1000 && (p < lowestPort || p >= lo) {
			t.Errorf("port %d outside [%d, %d)", p, lowestPort, lo)
		}
	}
}

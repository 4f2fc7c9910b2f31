package member_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
)

// serverSerial completes a TLS handshake with addr presenting the client
// pair and returns the serial of the certificate the server presented.
func serverSerial(t *testing.T, rawURL string, trust *tls.Config) *big.Int {
	t.Helper()
	host := rawURL[strings.Index(rawURL, "://")+3:]
	conn, err := tls.Dial("tcp", host, trust)
	if err != nil {
		t.Fatalf("dial %s: %v", rawURL, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func fileSerial(t *testing.T, path string) *big.Int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

// requestOf is the Request that re-issues the certificate in path, with
// extra DNS names (so the Renewer sees it as changed and renews it now).
func requestOf(t *testing.T, path string, usage pki.Usage, extraDNS ...string) pki.Request {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Request{CommonName: c.Subject.CommonName, Usage: usage, DNSNames: append(c.DNSNames, extraDNS...), IPs: c.IPAddresses}
}

// TestRenewalWithoutRestart: a member whose server and peer certificates
// are re-issued on disk by a pki.Renewer presents the new ones at the next
// handshake, without a restart; clients keep being served.
func TestRenewalWithoutRestart(t *testing.T) {
	t.Parallel()
	runtimes := map[string]func() member.Runtime{
		"embedded": func() member.Runtime { return member.NewEmbedded(member.WithTimings(testTick, testElection)) },
	}
	for _, bin := range etcdtest.Binaries(t) {
		runtimes["exec-etcd-"+bin.Version] = func() member.Runtime {
			return member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
		}
	}
	for name, newRuntime := range runtimes {
		t.Run(name, func(t *testing.T) {
			ctx := caseContext(t)
			rt := newRuntime()
			stopAll(t, rt)
			cfg := configFor(t, "renew", true)
			if err := rt.Start(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			cli := etcdtest.NewClient(t, cfg.ClientURL)
			if _, err := cli.Put(ctx, "k", "before"); err != nil {
				t.Fatal(err)
			}
			root := etcdtest.ClientTLS(t, pki.RootIdentity)
			peerPair, err := tls.LoadX509KeyPair(cfg.TLS.PeerCertFile, cfg.TLS.PeerKeyFile)
			if err != nil {
				t.Fatal(err)
			}
			asPeer := &tls.Config{RootCAs: root.RootCAs, Certificates: []tls.Certificate{peerPair}, MinVersion: tls.VersionTLS12}

			oldServer, oldPeer := fileSerial(t, cfg.TLS.ServerCertFile), fileSerial(t, cfg.TLS.PeerCertFile)
			if got := serverSerial(t, cfg.ClientURL, root); got.Cmp(oldServer) != 0 {
				t.Fatalf("client URL presents serial %x, want %x (the file's)", got, oldServer)
			}
			if got := serverSerial(t, cfg.PeerURL, asPeer); got.Cmp(oldPeer) != 0 {
				t.Fatalf("peer URL presents serial %x, want %x (the file's)", got, oldPeer)
			}

			renewed := map[string]bool{}
			r, err := pki.NewRenewer(pki.RenewerConfig{
				CA: func() (*pki.CA, error) { return etcdtest.PKI(t), nil },
				Leaves: []pki.Leaf{
					{Name: pki.EtcdServerLeaf, CertFile: cfg.TLS.ServerCertFile, KeyFile: cfg.TLS.ServerKeyFile,
						Request: requestOf(t, cfg.TLS.ServerCertFile, pki.UsageServer, "renewed.test")},
					{Name: pki.EtcdPeerLeaf, CertFile: cfg.TLS.PeerCertFile, KeyFile: cfg.TLS.PeerKeyFile,
						Request: requestOf(t, cfg.TLS.PeerCertFile, pki.UsagePeer, "renewed.test")},
				},
				OnRenew: func(d pki.Due) { renewed[d.Leaf.Name] = true },
			}, slog.New(slog.NewTextHandler(t.Output(), nil)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.RenewOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if !renewed[pki.EtcdServerLeaf] || !renewed[pki.EtcdPeerLeaf] {
				t.Fatalf("renewed %v, want both leaves", renewed)
			}
			newServer, newPeer := fileSerial(t, cfg.TLS.ServerCertFile), fileSerial(t, cfg.TLS.PeerCertFile)
			if newServer.Cmp(oldServer) == 0 || newPeer.Cmp(oldPeer) == 0 {
				t.Fatal("the renewer did not write new certificates")
			}
			if got := serverSerial(t, cfg.ClientURL, root); got.Cmp(newServer) != 0 {
				t.Errorf("after renewal the client URL presents serial %x, want the new %x (old %x)", got, newServer, oldServer)
			}
			if got := serverSerial(t, cfg.PeerURL, asPeer); got.Cmp(newPeer) != 0 {
				t.Errorf("after renewal the peer URL presents serial %x, want the new %x (old %x)", got, newPeer, oldPeer)
			}
			// Same process, still serving: a new client is served with the new certificate.
			cli2 := etcdtest.NewClient(t, cfg.ClientURL)
			if resp, err := cli2.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("Get after renewal = %v, %v", resp, err)
			}
			select {
			case <-rt.Done():
				t.Fatalf("member exited: %v", rt.Err())
			default:
			}
		})
	}
}

// TestTrustedCAReadAtStart pins the fact docs/security.md's CA rotation
// procedure rests on: etcd reads its trusted CA file once, at start. A CA
// added to the file is trusted only after a restart.
func TestTrustedCAReadAtStart(t *testing.T) {
	t.Parallel()
	ctx := caseContext(t)
	rt := member.NewEmbedded(member.WithTimings(testTick, testElection))
	stopAll(t, rt)
	cfg := configFor(t, "ca", true)
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("rotated-ca", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := newCA.Issue(pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	fromNewCA := &tls.Config{
		RootCAs: etcdtest.PKI(t).Pool(), MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
	}
	host := strings.TrimPrefix(cfg.ClientURL, "https://")

	// etcd builds its client TLS configuration, reading the CA file, once it
	// is ready, a moment after ReadyNotify: wait until it serves root.
	if err := handshake(host, etcdtest.ClientTLS(t, pki.RootIdentity)); err != nil {
		t.Fatalf("root client refused: %v", err)
	}
	if err := handshake(host, fromNewCA); err == nil {
		t.Fatal("a client of a CA the member does not trust was accepted")
	}
	// The bundle: old CA and new CA in the trusted file.
	oldPEM, err := os.ReadFile(cfg.TLS.TrustedCAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(cfg.TLS.TrustedCAFile, append(oldPEM, newCA.CertPEM...)); err != nil {
		t.Fatal(err)
	}
	if err := handshake(host, fromNewCA); err == nil {
		t.Fatal("a client of the new CA was accepted before a restart: etcd reloads its trusted CA file; update docs/security.md")
	}

	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := handshake(host, fromNewCA); err != nil {
		t.Fatalf("after a restart with the bundle, a client of the new CA is refused: %v", err)
	}
	// And the old CA's clients still are served.
	if _, err := etcdtest.NewClient(t, cfg.ClientURL).Put(context.Background(), "k", "v"); err != nil {
		t.Fatalf("old CA client after restart: %v", err)
	}
}

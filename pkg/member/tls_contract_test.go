package member_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/systemdtest"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// testClientCertRequired: a member with TLS serves https only, to clients
// whose certificate chains to its CA.
func testClientCertRequired(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	rt := rs.new()
	stopAll(t, rt)
	cfg := rs.config(t, "mtls")
	if !strings.HasPrefix(cfg.ClientURL, "https://") || !strings.HasPrefix(cfg.PeerURL, "https://") {
		t.Fatalf("URLs %s, %s: want https", cfg.ClientURL, cfg.PeerURL)
	}
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// The root client of the test CA is served.
	if _, err := etcdtest.NewClient(t, cfg.ClientURL).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put with a client certificate: %v", err)
	}

	forged := etcdtest.ForeignCertificate(t, pki.RootIdentity)
	trust := etcdtest.PKI(t).Pool()
	refused := map[string]*tls.Config{
		"no certificate": {RootCAs: trust, MinVersion: tls.VersionTLS12},
		"a certificate from another CA": {
			RootCAs: trust, MinVersion: tls.VersionTLS12,
			// Sent whatever CAs the server says it accepts.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged, nil },
		},
	}
	host := strings.TrimPrefix(cfg.ClientURL, "https://")
	for name, tc := range refused {
		if err := handshake(host, tc); err == nil {
			t.Errorf("client with %s completed a TLS handshake", name)
		} else {
			t.Logf("client with %s: %v", name, err)
		}
	}
	// A plaintext client is not served either.
	hc := &http.Client{Timeout: 5 * time.Second}
	if resp, err := hc.Get("http://" + host + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("a plaintext client was served /health")
		}
	}
}

// handshake reports whether the server at addr accepts cfg's client
// certificate: it asks for /health over TLS, and any HTTP answer means the
// handshake, the server's verdict on the certificate included, succeeded.
func handshake(addr string, cfg *tls.Config) error {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := hc.Get("https://" + addr + "/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func TestEmbeddedContractTLS(t *testing.T) {
	t.Parallel()
	runtimeContract(t, withTLS(func() member.Runtime {
		return member.NewEmbedded(member.WithTimings(testTick, testElection))
	}))
}

func TestExecContractTLS(t *testing.T) {
	t.Parallel()
	for _, bin := range etcdtest.Binaries(t) {
		t.Run("etcd-"+bin.Version, func(t *testing.T) {
			runtimeContract(t, withTLS(func() member.Runtime {
				return member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
			}))
		})
	}
}

func TestSystemdContractTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts etcd members")
	}
	runtimeContract(t, withTLS(func() member.Runtime { return newSystemdFixture(t).rt }))
}

// TestConfigTLSValidation: the URLs' scheme must agree with Config.TLS, and
// TLS names every file it needs.
func TestConfigTLSValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := &member.TLS{
		TrustedCAFile: filepath.Join(dir, "ca.crt"), ServerCertFile: "s.crt", ServerKeyFile: "s.key",
		PeerCertFile: "p.crt", PeerKeyFile: "p.key",
	}
	noCA := *files
	noCA.TrustedCAFile = ""
	halfClient := *files
	halfClient.ClientCertFile = "c.crt"
	cases := []struct {
		name, peer, client string
		tls                *member.TLS
		want               string
	}{
		{"https without TLS", "https://127.0.0.1:1", "https://127.0.0.1:2", nil, "Config.TLS is nil"},
		{"http with TLS", "http://127.0.0.1:1", "http://127.0.0.1:2", files, "want an https URL"},
		{"mixed", "https://127.0.0.1:1", "http://127.0.0.1:2", files, "Config.ClientURL"},
		{"no CA", "https://127.0.0.1:1", "https://127.0.0.1:2", &noCA, "TrustedCAFile is empty"},
		{"half a client pair", "https://127.0.0.1:1", "https://127.0.0.1:2", &halfClient, "want both or neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := member.Config{Name: "x", DataDir: dir, PeerURL: tc.peer, ClientURL: tc.client, TLS: tc.tls}
			err := member.NewEmbedded().Start(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestEnvironmentTLS: the systemd environment file carries the TLS flags
// etcd reads from ETCD_* variables, and reads back the same.
func TestEnvironmentTLS(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, "envtls")
	peer, client := etcdtest.URLsFor(t, true)
	cfg.PeerURL, cfg.ClientURL = peer, client
	cfg.TLS = etcdtest.MemberTLS(t, cfg.Name, peer, client)
	path := filepath.Join(t.TempDir(), "etcd.env")
	if err := member.WriteEnvironmentFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	env, err := member.ReadEnvironmentFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ETCD_CERT_FILE":             cfg.TLS.ServerCertFile,
		"ETCD_KEY_FILE":              cfg.TLS.ServerKeyFile,
		"ETCD_TRUSTED_CA_FILE":       cfg.TLS.TrustedCAFile,
		"ETCD_CLIENT_CERT_AUTH":      "true",
		"ETCD_PEER_CERT_FILE":        cfg.TLS.PeerCertFile,
		"ETCD_PEER_KEY_FILE":         cfg.TLS.PeerKeyFile,
		"ETCD_PEER_TRUSTED_CA_FILE":  cfg.TLS.TrustedCAFile,
		"ETCD_PEER_CLIENT_CERT_AUTH": "true",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	back, err := member.TLSFromEnvironment(env)
	if err != nil {
		t.Fatal(err)
	}
	if *back != *cfg.TLS {
		t.Errorf("read back %+v, want %+v", back, cfg.TLS)
	}
	plainEnv := member.Environment(configFor(t, "plain", false))
	if _, ok := plainEnv["ETCD_CERT_FILE"]; ok {
		t.Error("a plaintext member's environment names a certificate")
	}
}

// TestSystemdLeavesTLSToTheUnit: without TLSInEnvironment the environment
// file names no certificate (the unit's own TLS settings stay in force).
func TestSystemdLeavesTLSToTheUnit(t *testing.T) {
	t.Parallel()
	envFile := filepath.Join(t.TempDir(), "etcd.env")
	units := systemdtest.NewUnits()
	units.Add(member.DefaultUnit, systemdtest.NewEtcd(envFile, testLogger(t)))
	rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Journal: units, EnvironmentFile: envFile})
	if err != nil {
		t.Fatal(err)
	}
	stopAll(t, rt)
	cfg := configFor(t, "unit-tls", true)
	ctx, cancel := context.WithTimeout(caseContext(t), 5*time.Second)
	defer cancel()
	_ = rt.Start(ctx, cfg) // the fake unit has no TLS of its own: it cannot serve https
	env, err := member.ReadEnvironmentFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if env["ETCD_NAME"] != "unit-tls" {
		t.Fatalf("environment file not written: %v", env)
	}
	for k := range env {
		if strings.Contains(k, "CERT") || strings.Contains(k, "KEY") || strings.Contains(k, "TRUSTED") {
			t.Errorf("environment file names %s", k)
		}
	}
}

// testRestartWithAuth: once etcd's auth is on (pkg/rbac), a member still
// restarts: its readiness client's certificate (the peer pair, CN
// etcd:<name>, no etcd user) is enough for Status, and root's certificate
// still writes.
func testRestartWithAuth(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	rt := rs.new()
	stopAll(t, rt)
	cfg := rs.config(t, "auth")
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	cli := etcdtest.NewClient(t, cfg.ClientURL)
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserAddWithOptions(ctx, pki.RootIdentity, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, pki.RootIdentity, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("restart with auth enabled: %v", err)
	}
	cli2 := etcdtest.NewClient(t, cfg.ClientURL)
	if _, err := cli2.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put as root with auth enabled: %v", err)
	}
	// A certificate whose CN is no etcd user may not write.
	node, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, TLS: etcdtest.ClientTLS(t, pki.NodeIdentity("stranger")), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := node.Put(ctx, "k", "stranger"); err == nil {
		t.Error("a client whose CN is no etcd user could write with auth enabled")
	}
}

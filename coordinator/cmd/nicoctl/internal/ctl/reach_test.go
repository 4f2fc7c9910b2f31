package ctl

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
)

// refusedEndpoint is an https URL on a loopback port nothing listens on.
func refusedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "https://" + addr
}

// TestRefusedPortFailsFast: when the endpoint refuses connections at once,
// nicoctl says so at once instead of waiting its whole --timeout.
func TestRefusedPortFailsFast(t *testing.T) {
	ep := refusedEndpoint(t)
	start := time.Now()
	r := run(t, []string{ep}, "status", "--timeout", "20s")
	elapsed := time.Since(start)
	r.want(t, ExitUsage, nil, []string{"cannot reach etcd at " + ep, "connection refused", "--endpoints"})
	if elapsed > 5*time.Second {
		t.Errorf("took %s to report a refused port; want well under the 20s timeout", elapsed)
	}
}

// silentEndpoint is an https URL on a loopback port whose listener never
// accepts: the kernel completes the TCP handshake, but nothing ever answers
// TLS, as with a host that has hung or a firewall that swallows the reply.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "https://" + ln.Addr().String()
}

// TestSilentEndpointFailsWithinTheDialTimeout: an endpoint that never
// answers fails once the dial timeout is up, not the whole --timeout,
// with the same exit code as a refused port and an error that names the
// endpoint and --dialTimeout.
func TestSilentEndpointFailsWithinTheDialTimeout(t *testing.T) {
	ep := silentEndpoint(t)
	start := time.Now()
	r := run(t, []string{ep}, "status", "--timeout", "20s")
	elapsed := time.Since(start)
	r.want(t, ExitUsage, nil, []string{"cannot reach etcd at " + ep, "--dialTimeout", "--endpoints"})
	if elapsed > 10*time.Second {
		t.Errorf("took %s to give up on a silent endpoint; want about the 2s dial timeout, well under the 20s timeout", elapsed)
	}
	start = time.Now()
	run(t, []string{ep, refusedEndpoint(t)}, "get", "members", "--timeout", "20s", "--dialTimeout", "300ms").want(t, ExitUsage, nil, []string{ep, "--dialTimeout"})
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %s with --dialTimeout 300ms", elapsed)
	}
}

// TestRelativeCertificatePaths: certificate paths relative to the working
// directory are accepted and reach the cluster.
func TestRelativeCertificatePaths(t *testing.T) {
	c := etcdtest.Start(t, 1)
	dir := t.TempDir()
	root := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	t.Chdir(dir)
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var out, errb bytes.Buffer
	args := []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--tls.caFile", rel(root.CA), "--tls.certFile", rel(root.Cert), "--tls.keyFile", rel(root.Key), "get", "members"}
	if code := Main(args, &out, &errb); code != 0 {
		t.Fatalf("nicoctl %v -> %d\n%s", args, code, errb.String())
	}
	if !strings.Contains(out.String(), "voter") {
		t.Errorf("members table lacks the voter:\n%s", out.String())
	}
}

// TestNoClusterSaysWhatToPass: without certificate files (no cluster on this
// machine) the error names the flags, environment variables and config keys
// that point nicoctl at one.
func TestNoClusterSaysWhatToPass(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"--tls.caFile", filepath.Join(dir, "ca.crt"), "--tls.certFile", filepath.Join(dir, "root.crt"), "--tls.keyFile", filepath.Join(dir, "root.key"), "status"}
	code := Main(args, &out, &errb)
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d: %s", code, ExitUsage, errb.String())
	}
	for _, w := range []string{filepath.Join(dir, "ca.crt"), "--endpoints", "--tls.caFile", "--tls.certFile", "--tls.keyFile", "NICO_ENDPOINTS", "NICO_TLS_CAFILE", "--config"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("error does not mention %q:\n%s", w, errb.String())
		}
	}
}

// TestUnknownKindPointsAtGetHelp: `nicoctl get foo` lists the kinds get
// accepts and points at `nicoctl get --help`, not the root's help.
func TestUnknownKindPointsAtGetHelp(t *testing.T) {
	r := run(t, nil, "get", "foo")
	r.want(t, ExitUsage, nil, []string{`"foo"`, "members", "nodes", "ops", "etcdcluster", "nicoctl get --help"})
	if strings.Contains(r.stderr, "'nicoctl --help'") {
		t.Errorf("points at the root's help:\n%s", r.stderr)
	}
	run(t, nil, "remove", "node").want(t, ExitUsage, nil, []string{"nicoctl remove node --help"})
}

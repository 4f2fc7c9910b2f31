package ctl

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// caMachine makes a control-plane pki.dir signed by a fresh CA: ca.crt,
// ca.key, and the node and etcd-server leaves.
func caMachine(t *testing.T) (pki.Dir, *pki.CA) {
	t.Helper()
	old, err := pki.NewCA("old CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	if err := old.Save(d.CACert(), d.CAKey()); err != nil {
		t.Fatal(err)
	}
	for _, l := range testLeaves(d) {
		cert, key, err := old.Issue(l.Request, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WritePair(l.CertFile, cert, l.KeyFile, key); err != nil {
			t.Fatal(err)
		}
	}
	return d, old
}

func testLeaves(d pki.Dir) []pki.Leaf {
	return []pki.Leaf{
		{Name: pki.NodeLeaf, CertFile: d.Cert(pki.NodeLeaf), KeyFile: d.Key(pki.NodeLeaf), Request: pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}},
		{Name: pki.EtcdServerLeaf, CertFile: d.Cert(pki.EtcdServerLeaf), KeyFile: d.Key(pki.EtcdServerLeaf), Request: pki.Request{CommonName: pki.MemberIdentity("cp-1"), Usage: pki.UsageServer, DNSNames: []string{"localhost"}}},
	}
}

func caStatusJSON(t *testing.T, d pki.Dir) caStatusOut {
	t.Helper()
	r := run(t, nil, "-o", "json", "ca", "status", "--pki-dir", string(d))
	r.want(t, 0, nil, nil)
	var st caStatusOut
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("ca status JSON: %v\n%s", err, r.stdout)
	}
	return st
}

func assertPerm(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
}

// TestCARotationCommands walks one control-plane machine's pki.dir through
// the rotation: new, trust, activate, the renewer's pass, untrust; every
// step out of order is refused with a message naming the file.
func TestCARotationCommands(t *testing.T) {
	d, old := caMachine(t)
	oldFile := filepath.Join(t.TempDir(), "old-ca.crt")
	if err := pki.WriteFile(oldFile, old.CertPEM); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ca-next")
	nd := pki.Dir(out)

	run(t, nil, "ca", "new", "--out", out, "--common-name", "next CA").want(t, 0, []string{`new CA "next CA"`, nd.CACert()}, nil)
	assertPerm(t, nd.CACert())
	assertPerm(t, nd.CAKey())
	run(t, nil, "ca", "new", "--out", out).want(t, 2, nil, []string{nd.CACert() + " exists"})
	next, err := pki.LoadCA(nd.CACert(), nd.CAKey())
	if err != nil {
		t.Fatal(err)
	}

	st := caStatusJSON(t, d)
	if st.Phase != "steady" || len(st.CAs) != 1 || !st.CAs[0].Signs || len(st.Leaves) != 2 || st.Leaves[0].Issuer != fingerprint(old.Cert) {
		t.Fatalf("status before: %+v", st)
	}

	// Activating a CA the machine does not trust yet would cut it off.
	run(t, nil, "ca", "activate", nd.CACert(), nd.CAKey(), "--pki-dir", string(d)).want(t, 3, nil, []string{d.CACert() + ` does not trust "next CA"`, "nicoctl ca trust"})

	run(t, nil, "ca", "trust", nd.CACert(), "--pki-dir", string(d)).want(t, 0, []string{"trusts 2 CAs now"}, nil)
	assertPerm(t, d.CACert())
	run(t, nil, "ca", "trust", nd.CACert(), "--pki-dir", string(d)).want(t, 0, []string{"already trusts"}, nil)
	if st := caStatusJSON(t, d); st.Phase != "steady" && st.Phase != "rotated" || len(st.CAs) != 2 || !st.CAs[0].Signs || st.CAs[1].Signs {
		t.Fatalf("status after trust: %+v", st)
	}
	// The old CA still signs: untrusting it is refused.
	run(t, nil, "ca", "untrust", oldFile, "--pki-dir", string(d)).want(t, 3, nil, []string{`"old CA"`, "still signs", "activate the new CA first"})
	// A key of another CA is refused, naming both files.
	run(t, nil, "ca", "activate", nd.CACert(), d.CAKey(), "--pki-dir", string(d)).want(t, 2, nil, []string{nd.CACert() + " and " + d.CAKey() + " are not a CA and its key"})

	run(t, nil, "ca", "activate", nd.CACert(), nd.CAKey(), "--pki-dir", string(d)).want(t, 0, []string{`"next CA"`, "signs on this machine now"}, nil)
	assertPerm(t, d.CAKey())
	if ca, err := pki.LoadCA(d.CACert(), d.CAKey()); err != nil || !ca.Cert.Equal(next.Cert) {
		t.Fatalf("signer after activate: %v %v", ca, err)
	}
	run(t, nil, "ca", "activate", nd.CACert(), nd.CAKey(), "--pki-dir", string(d)).want(t, 0, []string{"already signs"}, nil)
	st = caStatusJSON(t, d)
	if st.Phase != "rotating" || st.CAs[0].Signs || !st.CAs[1].Signs || !st.Leaves[0].ByOtherCA {
		t.Fatalf("status after activate: %+v", st)
	}
	// Leaves of the old CA left: untrusting it is refused, naming them.
	run(t, nil, "ca", "untrust", oldFile, "--pki-dir", string(d)).want(t, 3, nil, []string{d.Cert(pki.EtcdServerLeaf), d.Cert(pki.NodeLeaf), "still signed by"})

	// The agent's renewer re-issues them with the new CA.
	r, err := pki.NewRenewer(pki.RenewerConfig{CA: func() (*pki.CA, error) { return pki.LoadCA(d.CACert(), d.CAKey()) }, Leaves: testLeaves(d)}, logging.Test(t))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r.RenewOnce(t.Context()); err != nil || len(done) != 2 || done[0].Reason != pki.ReasonIssuer {
		t.Fatalf("renewal: %v %v", done, err)
	}
	if st := caStatusJSON(t, d); st.Phase != "rotated" || st.Leaves[0].Issuer != fingerprint(next.Cert) || st.Leaves[1].ByOtherCA {
		t.Fatalf("status after renewal: %+v", st)
	}
	run(t, nil, "ca", "status", "--pki-dir", string(d)).want(t, 0, []string{"next CA", "yes", "etcd-server", "phase:", "rotated"}, nil)

	run(t, nil, "ca", "untrust", oldFile, "--pki-dir", string(d)).want(t, 0, []string{`no longer trusts "old CA"`, "1 CA(s) left"}, nil)
	assertPerm(t, d.CACert())
	if st := caStatusJSON(t, d); st.Phase != "steady" || len(st.CAs) != 1 || st.CAs[0].Fingerprint != fingerprint(next.Cert) {
		t.Fatalf("status after untrust: %+v", st)
	}
	run(t, nil, "ca", "untrust", oldFile, "--pki-dir", string(d)).want(t, 0, []string{"does not trust"}, nil)
	// The last CA cannot go.
	run(t, nil, "ca", "untrust", nd.CACert(), "--pki-dir", string(d)).want(t, 3, nil, []string{"still signs"})
}

// TestCACommandErrors: bad files and bad machines are refused with the file
// named and what is wrong.
func TestCACommandErrors(t *testing.T) {
	d, _ := caMachine(t)
	missing := filepath.Join(t.TempDir(), "nope.crt")
	run(t, nil, "ca", "trust", missing, "--pki-dir", string(d)).want(t, 2, nil, []string{missing, "no such file"})
	run(t, nil, "ca", "trust", d.Cert(pki.NodeLeaf), "--pki-dir", string(d)).want(t, 2, nil, []string{d.Cert(pki.NodeLeaf), `"node:cp-1" is not a CA certificate`})
	run(t, nil, "ca", "trust", d.Key(pki.NodeLeaf), "--pki-dir", string(d)).want(t, 2, nil, []string{d.Key(pki.NodeLeaf), "no PEM certificate"})
	run(t, nil, "ca", "status", "--pki-dir", missing).want(t, 1, nil, []string{filepath.Join(missing, "ca.crt"), "is --pki-dir"})
	run(t, nil, "ca", "new").want(t, 2, nil, []string{`--out ""`})
	run(t, nil, "ca", "new", "--out", t.TempDir(), "--validity", "-1h").want(t, 2, nil, []string{"--validity -1h0m0s"})
	run(t, nil, "ca").want(t, 2, nil, []string{"new, trust, activate, renew-node, untrust, status or viewer"})

	// A worker holds no ca.key: activating there is refused.
	nd := pki.Dir(filepath.Join(t.TempDir(), "next"))
	run(t, nil, "ca", "new", "--out", string(nd)).want(t, 0, nil, nil)
	worker := pki.Dir(filepath.Join(t.TempDir(), "worker"))
	b, err := os.ReadFile(d.CACert())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(worker.CACert(), b); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "ca", "trust", nd.CACert(), "--pki-dir", string(worker)).want(t, 0, nil, nil)
	run(t, nil, "ca", "activate", nd.CACert(), nd.CAKey(), "--pki-dir", string(worker)).want(t, 3, nil, []string{worker.CAKey(), "only control-plane machines hold the CA key"})
	// An expired CA is refused.
	expired, err := pki.NewCA("expired", time.Hour, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ed := pki.Dir(filepath.Join(t.TempDir(), "expired"))
	if err := expired.Save(ed.CACert(), ed.CAKey()); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "ca", "activate", ed.CACert(), ed.CAKey(), "--pki-dir", string(d)).want(t, 2, nil, []string{ed.CACert() + " is valid from", "not now"})
}

// noTokens is a join.Tokens that knows none: renew-node needs no token.
type noTokens struct{}

func (noTokens) Get(context.Context, string) (*api.Token, error) { return nil, token.ErrUnknown }
func (noTokens) Used(context.Context, string, string, time.Time) error {
	return nil
}

// TestCARenewNode: a worker whose node certificate is of the old CA gets
// one of the new CA through a join endpoint that signs with it.
func TestCARenewNode(t *testing.T) {
	old, err := pki.NewCA("old CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	next, err := pki.NewCA("next CA", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := pki.AppendCA(old.CertPEM, next.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := enroll.NewServer(enroll.ServerConfig{Tokens: noTokens{}, Signer: next, CAPEM: bundle,
		Cluster: func(context.Context) (enroll.Cluster, error) { return enroll.Cluster{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := enroll.ServerCert(next, "cp-1", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, cert) }()
	t.Cleanup(func() { cancel(); <-served })

	w := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	c, k, err := old.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(w.Cert(pki.NodeLeaf), c, w.Key(pki.NodeLeaf), k); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(w.CACert(), bundle); err != nil {
		t.Fatal(err)
	}
	if st := caStatusJSON(t, w); st.Phase != "rotating" || !st.Leaves[0].ByOtherCA {
		t.Fatalf("worker before: %+v", st)
	}
	run(t, nil, "ca", "renew-node", "--pki-dir", string(w)).want(t, 2, nil, []string{"--join-endpoint is required"})
	run(t, nil, "ca", "renew-node", "--pki-dir", string(w), "--join-endpoint", ln.Addr().String()).
		want(t, 0, []string{w.Cert(pki.NodeLeaf) + " renewed", `"node:w-1"`, `signed by "next CA" ` + fingerprint(next.Cert)}, nil)
	assertPerm(t, w.Cert(pki.NodeLeaf))
	assertPerm(t, w.Key(pki.NodeLeaf))
	if st := caStatusJSON(t, w); st.Phase != "rotated" || st.Leaves[0].Issuer != fingerprint(next.Cert) {
		t.Fatalf("worker after: %+v", st)
	}
	// A control-plane machine re-issues its own.
	cp, _ := caMachine(t)
	run(t, nil, "ca", "renew-node", "--pki-dir", string(cp), "--join-endpoint", ln.Addr().String()).want(t, 3, nil, []string{"holds ca.key"})
}

// TestCAStatusKeyOfNoTrustedCA: a ca.key whose CA the bundle lacks is
// reported as broken, naming the file.
func TestCAStatusKeyOfNoTrustedCA(t *testing.T) {
	d, _ := caMachine(t)
	other, err := pki.NewCA("other", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	od := pki.Dir(t.TempDir())
	if err := other.Save(od.CACert(), od.CAKey()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(od.CAKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(d.CAKey(), b); err != nil {
		t.Fatal(err)
	}
	st := caStatusJSON(t, d)
	if st.Phase != "broken" || len(st.Notes) != 1 || !strings.Contains(st.Notes[0], d.CAKey()) {
		t.Fatalf("status: %+v", st)
	}
}

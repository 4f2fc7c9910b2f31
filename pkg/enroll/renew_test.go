package enroll

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
)

// renewWorld is a join endpoint on real HTTPS on 127.0.0.1 whose CA was
// made three hours ago, so that certificates that have already expired
// can be issued from it.
type renewWorld struct {
	t    *testing.T
	ca   *pki.CA
	ep   string
	logs *logging.Buffer
	log  *slog.Logger
	keys []string // key material the test made: none may be logged
}

func newRenewWorld(t *testing.T, rate RateLimit) *renewWorld {
	t.Helper()
	w := &renewWorld{t: t, logs: &logging.Buffer{}}
	w.log = slog.New(slog.NewTextHandler(io.MultiWriter(w.logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	if w.ca, err = pki.NewCA("renew test CA", 2*365*24*time.Hour, time.Now().Add(-3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{
		Tokens:    fakeTokens{},
		Signer:    w.ca,
		CAPEM:     w.ca.CertPEM,
		Cluster:   func(context.Context) (Cluster, error) { return Cluster{}, nil },
		RateLimit: rate,
		// gone-1 was removed from the cluster; broken-1's state cannot be read.
		NodeRemoved: func(_ context.Context, name string) (bool, error) {
			if name == "broken-1" {
				return false, errors.New("etcdserver: request timed out")
			}
			return name == "gone-1", nil
		},
		Log: w.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.ep = serve(t, srv, w.ca)
	t.Cleanup(func() {
		logs := w.logs.String()
		for _, k := range w.keys {
			if strings.Contains(logs, k) {
				t.Error("key material appears in the logs")
			}
		}
	})
	return w
}

// dir writes a pki.dir holding the cluster's ca.crt and a node key pair
// from ca (the cluster's when nil) for req, issued at issued.
func (w *renewWorld) dir(ca *pki.CA, req pki.Request, issued time.Time) pki.Dir {
	w.t.Helper()
	if ca == nil {
		ca = w.ca
	}
	req.Usage = pki.UsageClient
	cert, key, err := ca.Issue(req, issued)
	if err != nil {
		w.t.Fatal(err)
	}
	w.keys = append(w.keys, keyBody(key))
	d := pki.Dir(filepath.Join(w.t.TempDir(), "pki"))
	for _, f := range []struct {
		path string
		data []byte
	}{{d.Key(pki.NodeLeaf), key}, {d.Cert(pki.NodeLeaf), cert}, {d.CACert(), w.ca.CertPEM}} {
		if err := pki.WriteFile(f.path, f.data); err != nil {
			w.t.Fatal(err)
		}
	}
	return d
}

func (w *renewWorld) cfg() RenewConfig {
	return RenewConfig{Endpoints: []string{w.ep}, Log: w.log}
}

// raw posts body to /v1/renew presenting d's node key pair (none when d
// is empty).
func (w *renewWorld) raw(d pki.Dir, body []byte) (RenewResponse, error) {
	w.t.Helper()
	client := pinned(w.ca.Pool())
	if d != "" {
		pair, err := tls.LoadX509KeyPair(d.Cert(pki.NodeLeaf), d.Key(pki.NodeLeaf))
		if err != nil {
			w.t.Fatal(err)
		}
		client = pinnedWithCert(w.ca.Pool(), pair)
	}
	hr, err := http.NewRequest(http.MethodPost, "https://"+w.ep+PathRenew, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	var resp RenewResponse
	err = do(client, hr, w.ep, &resp, nil)
	return resp, err
}

func csrBody(t *testing.T, cn string) []byte {
	t.Helper()
	csr, _, err := pki.NewCSR(cn)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(RenewRequest{CSRPEM: string(csr)})
	return b
}

func TestRenew(t *testing.T) {
	w := newRenewWorld(t, RateLimit{})
	d := w.dir(nil, pki.Request{CommonName: pki.NodeIdentity("w-1"), Validity: 2 * time.Hour}, time.Now())
	old := readNodeCert(t, d)
	oldKey, _ := os.ReadFile(d.Key(pki.NodeLeaf))
	c, err := Renew(context.Background(), w.cfg(), d)
	if err != nil {
		t.Fatal(err)
	}
	got := readNodeCert(t, d)
	if !got.Equal(c) || got.SerialNumber.Cmp(old.SerialNumber) == 0 || got.Subject.CommonName != "node:w-1" {
		t.Fatalf("renewed: serial %s (was %s), CN %q", got.SerialNumber.Text(16), old.SerialNumber.Text(16), got.Subject.CommonName)
	}
	if !reflect.DeepEqual(got.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || !got.NotAfter.After(old.NotAfter) {
		t.Fatalf("renewed: usage %v, notAfter %s (was %s)", got.ExtKeyUsage, got.NotAfter, old.NotAfter)
	}
	newKey, _ := os.ReadFile(d.Key(pki.NodeLeaf))
	if bytes.Equal(oldKey, newKey) {
		t.Fatal("renewal kept the key")
	}
	w.keys = append(w.keys, keyBody(newKey))
	for _, f := range []string{d.Cert(pki.NodeLeaf), d.Key(pki.NodeLeaf)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	// The new pair opens the endpoint again: it renews once more.
	if _, err := Renew(context.Background(), w.cfg(), d); err != nil {
		t.Fatalf("renewing the renewed certificate: %v", err)
	}
	if logs := w.logs.String(); !strings.Contains(logs, "node certificate renewed") || !strings.Contains(logs, "node=w-1") || !strings.Contains(logs, old.SerialNumber.Text(16)) {
		t.Fatalf("the renewal is not logged with node and serials:\n%s", logs)
	}

	// The CSR's subject is ignored: the certificate keeps the node's CN.
	resp, err := w.raw(d, csrBody(t, pki.RootIdentity))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pki.ParseCert([]byte(resp.CertPEM)); err != nil || c.Subject.CommonName != "node:w-1" {
		t.Fatalf("a CSR naming root: %v %v", c.Subject.CommonName, err)
	}
}

func readNodeCert(t *testing.T, d pki.Dir) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(d.Cert(pki.NodeLeaf))
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRenewRefusals(t *testing.T) {
	w := newRenewWorld(t, RateLimit{})
	ctx := context.Background()
	now := time.Now()
	foreign, err := pki.NewCA("another CA", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	node := pki.Request{CommonName: pki.NodeIdentity("w-1")}
	expired := w.dir(nil, pki.Request{CommonName: node.CommonName, Validity: time.Hour}, now.Add(-3*time.Hour))
	notYet := w.dir(nil, node, now.Add(2*time.Hour))
	valid := w.dir(nil, node, now)

	for _, c := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{"another CA", renewErr(w, w.dir(foreign, node, now)), ErrBadClientCert, "not a client certificate from this cluster's CA"},
		// The client does not send an expired certificate...
		{"expired, client", renewErr(w, expired), ErrCertExpired, "must join again with a token"},
		// ...and the endpoint refuses one from a client whose clock is behind.
		{"expired, endpoint", func() error {
			cfg := w.cfg()
			cfg.Now = func() time.Time { return now.Add(-150 * time.Minute) }
			_, err := Renew(ctx, cfg, expired)
			return err
		}(), ErrCertExpired, "the node must join again with a token"},
		{"not yet valid", renewErr(w, notYet), ErrClockSkew, "is not valid before"},
		{"root CN, client", renewErr(w, w.dir(nil, pki.Request{CommonName: pki.RootIdentity}, now)), ErrNotNode, `CN "root"`},
		{"root CN, endpoint", rawErr(w, w.dir(nil, pki.Request{CommonName: pki.RootIdentity}, now), csrBody(t, pki.RootIdentity)), ErrNotNode, "only node certificates are renewed here"},
		{"coordinator CN", rawErr(w, w.dir(nil, pki.Request{CommonName: pki.CoordinatorIdentity}, now), csrBody(t, "x")), ErrNotNode, "nico-coordinator"},
		{"bad node name", rawErr(w, w.dir(nil, pki.Request{CommonName: "node:W_1"}, now), csrBody(t, "x")), ErrNotNode, "node:<name>"},
		{"no client certificate", rawErr(w, "", csrBody(t, "x")), ErrNoClientCert, "needs the node's current certificate"},
		{"CSR not PEM", rawErr(w, valid, []byte(`{"csrPEM":"garbage"}`)), ErrBadRequest, "csrPEM: a PEM CERTIFICATE REQUEST is accepted"},
		{"CSR signature", rawErr(w, valid, badSignatureCSR(t)), ErrBadRequest, "csrPEM:"},
		{"unknown field", rawErr(w, valid, []byte(`{"csrPEM":"x","name":"root"}`)), ErrBadRequest, "unknown field"},
		{"the current key", rawErr(w, valid, sameKeyCSR(t, valid)), ErrBadRequest, "renew with a new key"},
		{"removed node", renewErr(w, w.dir(nil, pki.Request{CommonName: pki.NodeIdentity("gone-1")}, now)), ErrNodeRemoved, "node gone-1 was removed from the cluster; its certificate is not renewed"},
		{"node state unreadable", renewErr(w, w.dir(nil, pki.Request{CommonName: pki.NodeIdentity("broken-1")}, now)), errAny, "read the node's state"},
	} {
		if (c.want != errAny && !errors.Is(c.err, c.want)) || !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, c.err, c.want, c.says)
		}
	}
	// No refusal replaced the files.
	if c := readNodeCert(t, expired); c.NotAfter.After(now) {
		t.Error("an expired certificate was replaced")
	}
}

// errAny matches any error (errors.Is is then not what a case checks).
var errAny = errors.New("any error")

func renewErr(w *renewWorld, d pki.Dir) error {
	_, err := Renew(context.Background(), w.cfg(), d)
	if err == nil {
		return errors.New("renewed")
	}
	return err
}

func rawErr(w *renewWorld, d pki.Dir, body []byte) error {
	_, err := w.raw(d, body)
	if err == nil {
		return errors.New("renewed")
	}
	return err
}

// badSignatureCSR is a request whose signature does not verify.
func badSignatureCSR(t *testing.T) []byte {
	csr, _, _ := pki.NewCSR("x")
	block, _ := pem.Decode(csr)
	der := block.Bytes
	der[len(der)-3] ^= 0xff
	b, _ := json.Marshal(RenewRequest{CSRPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	return b
}

// sameKeyCSR is a request for the key d's certificate already has.
func sameKeyCSR(t *testing.T, d pki.Dir) []byte {
	b, _ := os.ReadFile(d.Key(pki.NodeLeaf))
	key, err := pki.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(RenewRequest{CSRPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	return body
}

// TestRenewRateLimit: renewals share the per-source limit of joins.
func TestRenewRateLimit(t *testing.T) {
	w := newRenewWorld(t, RateLimit{Burst: 1, Every: time.Hour})
	d := w.dir(nil, pki.Request{CommonName: pki.NodeIdentity("w-1")}, time.Now())
	if _, err := Renew(context.Background(), w.cfg(), d); err != nil {
		t.Fatal(err)
	}
	_, err := Renew(context.Background(), w.cfg(), d)
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("over the rate: %v", err)
	}
}

// TestRenewSkipsDeadEndpoint: an endpoint that cannot be reached is
// skipped; a refusal is not.
func TestRenewSkipsDeadEndpoint(t *testing.T) {
	w := newRenewWorld(t, RateLimit{})
	d := w.dir(nil, pki.Request{CommonName: pki.NodeIdentity("w-1")}, time.Now())
	cfg := w.cfg()
	cfg.Endpoints = []string{"127.0.0.1:1", w.ep}
	if _, err := Renew(context.Background(), cfg, d); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeRenewRequest feeds DecodeRenewRequest the body of POST
// /v1/renew. A body is either refused with an error, or holds a CSR that
// pki parses (its signature verified) and encodes back to the same request.
func FuzzDecodeRenewRequest(f *testing.F) {
	csr, _, err := pki.NewCSR(pki.NodeIdentity("w1"))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(RenewRequest{CSRPEM: string(csr)})
	f.Add(good)
	f.Add([]byte(`{"csrPEM":"garbage"}`))
	f.Add([]byte(`{"csrPEM":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}`))
	f.Add([]byte(`{"csrPEM":"x","name":"root"}`))
	f.Add(append(append([]byte{}, good...), good...))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRenewRequest(body)
		if err != nil {
			if req != (RenewRequest{}) {
				t.Fatalf("error %v with a request %+v", err, req)
			}
			return
		}
		if _, err := pki.ParseCSR([]byte(req.CSRPEM)); err != nil {
			t.Fatalf("accepted a CSR that pki cannot parse: %v", err)
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		back, err := DecodeRenewRequest(enc)
		if err != nil || back != req {
			t.Fatalf("round trip of %s: %+v %v", enc, back, err)
		}
	})
}

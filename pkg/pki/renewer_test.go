package pki

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRenewer(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	dir := Dir(filepath.Join(t.TempDir(), "pki"))
	leaf := func(name string, req Request) Leaf {
		return Leaf{Name: name, CertFile: dir.Cert(name), KeyFile: dir.Key(name), Request: req}
	}
	leaves := []Leaf{
		leaf(EtcdServerLeaf, Request{CommonName: MemberIdentity("m1"), Usage: UsageServer, DNSNames: []string{"localhost"}, Validity: 90 * time.Minute}),
		leaf(NodeLeaf, Request{CommonName: NodeIdentity("n1"), Usage: UsageClient, Validity: 300 * time.Minute}),
	}
	current := ca
	var renewed []Due
	var logs bytes.Buffer
	r, err := NewRenewer(RenewerConfig{
		CA:      func() (*CA, error) { return current, nil },
		Leaves:  leaves,
		OnRenew: func(d Due) { renewed = append(renewed, d) },
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	r.Now = func() time.Time { return now }
	ctx := context.Background()

	pass := func(step string, want ...Reason) {
		t.Helper()
		renewed = nil
		done, err := r.RenewOnce(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(done) != len(want) || len(renewed) != len(want) {
			t.Fatalf("%s: renewed %v (hook saw %d), want reasons %v", step, done, len(renewed), want)
		}
		for i, d := range done {
			if d.Reason != want[i] {
				t.Errorf("%s: leaf %q reason %q, want %q", step, d.Leaf.Name, d.Reason, want[i])
			}
		}
		for _, l := range leaves {
			assertMode(t, l.CertFile, 0o600)
			assertMode(t, l.KeyFile, 0o600)
		}
	}
	serial := func(l Leaf) string {
		data, err := os.ReadFile(l.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.String()
	}

	pass("first pass issues missing leaves", ReasonMissing, ReasonMissing)
	assertMode(t, string(dir), 0o700)
	s0, n0 := serial(leaves[0]), serial(leaves[1])
	pass("second pass has nothing to do")

	now = t0.Add(61 * time.Minute) // server cert has < 1/3 left, node cert has plenty
	pass("server expiring", ReasonExpiring)
	if serial(leaves[0]) == s0 || serial(leaves[1]) != n0 {
		t.Error("wrong leaf re-issued")
	}

	os.Remove(leaves[1].KeyFile)
	pass("a lost key re-issues its leaf", ReasonMissing)

	current = newTestCA(t, "rotated-ca")
	pass("a new CA re-issues everything", ReasonIssuer, ReasonIssuer)
	pass("then nothing")

	for _, secret := range []string{"PRIVATE KEY", "BEGIN"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "certificate renewed") {
		t.Errorf("no renewal logged:\n%s", logs.String())
	}
	for _, l := range leaves {
		key, _ := os.ReadFile(l.KeyFile)
		if bytes.Contains(logs.Bytes(), key[40:80]) {
			t.Error("logs contain key material")
		}
	}
}

func TestRenewerRunStopsWithContext(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	dir := Dir(t.TempDir())
	renewed := make(chan Due, 1)
	r, err := NewRenewer(RenewerConfig{
		CA:      func() (*CA, error) { return ca, nil },
		Leaves:  []Leaf{{Name: "root", CertFile: dir.Cert("root"), KeyFile: dir.Key("root"), Request: Request{CommonName: RootIdentity, Usage: UsageClient}}},
		OnRenew: func(d Due) { renewed <- d },
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-renewed: // Run renews at once, not after the first Interval
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not renew a missing leaf")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewRenewerRefusesBadConfig(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	caf := func() (*CA, error) { return ca, nil }
	good := Request{CommonName: "x", Usage: UsageClient}
	cases := map[string]RenewerConfig{
		"no CA":       {Leaves: []Leaf{{Name: "x", CertFile: "a", KeyFile: "b", Request: good}}},
		"no files":    {CA: caf, Leaves: []Leaf{{Name: "x", Request: good}}},
		"bad request": {CA: caf, Leaves: []Leaf{{Name: "x", CertFile: "a", KeyFile: "b"}}},
	}
	for name, cfg := range cases {
		if _, err := NewRenewer(cfg, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%s: NewRenewer succeeded", name)
		}
	}
}

// TestRenewerCACheck: with CACheck, Run re-issues every leaf soon after
// another CA starts signing (nicoctl ca activate), not at the next Interval
// (an hour here).
func TestRenewerCACheck(t *testing.T) {
	old, next := newTestCA(t, "old"), newTestCA(t, "next")
	var cur atomic.Pointer[CA]
	cur.Store(old)
	dir := Dir(t.TempDir())
	renewed := make(chan Due, 4)
	r, err := NewRenewer(RenewerConfig{
		CA:       func() (*CA, error) { return cur.Load(), nil },
		Leaves:   []Leaf{{Name: "root", CertFile: dir.Cert("root"), KeyFile: dir.Key("root"), Request: Request{CommonName: RootIdentity, Usage: UsageClient}}},
		Interval: time.Hour,
		CACheck:  10 * time.Millisecond,
		OnRenew:  func(d Due) { renewed <- d },
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wait := func(want Reason) {
		t.Helper()
		select {
		case d := <-renewed:
			if d.Reason != want {
				t.Fatalf("renewed for %q, want %q", d.Reason, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no renewal for %q", want)
		}
	}
	wait(ReasonMissing)
	cur.Store(next)
	wait(ReasonIssuer)
	b, err := os.ReadFile(dir.Cert("root"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCert(b)
	if err != nil || c.CheckSignatureFrom(next.Cert) != nil {
		t.Fatalf("root after the CA changed: %v", err)
	}
}

// TestRenewerKeepsTheKey: a renewal re-signs the leaf's key and replaces
// its certificate alone, so a reader loading the pair on each handshake
// (etcd does) never reads a certificate with another's key, through a CA
// rotation too. A key that does not parse is replaced, with a warning.
func TestRenewerKeepsTheKey(t *testing.T) {
	cas := []*CA{newTestCA(t, "old"), newTestCA(t, "next")}
	var cur atomic.Int32
	dir := Dir(t.TempDir())
	l := Leaf{Name: EtcdServerLeaf, CertFile: dir.Cert(EtcdServerLeaf), KeyFile: dir.Key(EtcdServerLeaf),
		Request: Request{CommonName: MemberIdentity("m1"), Usage: UsageServer, DNSNames: []string{"localhost"}}}
	var logs bytes.Buffer
	r, err := NewRenewer(RenewerConfig{CA: func() (*CA, error) { return cas[cur.Load()%2], nil }, Leaves: []Leaf{l}},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.RenewOnce(ctx); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(l.KeyFile)

	stop := make(chan struct{})
	mismatch := make(chan error, 1)
	go func() {
		defer close(mismatch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile); err != nil {
				mismatch <- err
				return
			}
		}
	}()
	const rotations = 200
	for range rotations {
		cur.Add(1)
		if done, err := r.RenewOnce(ctx); err != nil || len(done) != 1 || done[0].Reason != ReasonIssuer {
			t.Fatalf("renewal for another CA: %v, %v", done, err)
		}
	}
	close(stop)
	if err := <-mismatch; err != nil {
		t.Fatalf("a reader loaded a broken pair during a renewal: %v", err)
	}
	if now, _ := os.ReadFile(l.KeyFile); !bytes.Equal(now, key) {
		t.Fatal("a renewal replaced the leaf's key")
	}

	if err := WriteFile(l.KeyFile, []byte("not a key")); err != nil {
		t.Fatal(err)
	}
	if done, err := r.RenewOnce(ctx); err != nil || len(done) != 1 {
		t.Fatalf("renewal of a leaf with a broken key: %v, %v", done, err)
	}
	if _, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile); err != nil {
		t.Fatalf("the pair after a broken key: %v", err)
	}
	if !strings.Contains(logs.String(), "issuing a new key") || !strings.Contains(logs.String(), l.KeyFile) {
		t.Errorf("no warning names the broken key file:\n%s", logs.String())
	}
}

// A pass first finishes a pair's write that a crash cut short: the leaf
// whose new key is in place gets its new certificate, not a renewal.
func TestRenewerFinishesAnInterruptedWrite(t *testing.T) {
	ca := newTestCA(t, "fleet")
	dir := Dir(t.TempDir())
	l := Leaf{Name: EtcdServerLeaf, CertFile: dir.Cert(EtcdServerLeaf), KeyFile: dir.Key(EtcdServerLeaf),
		Request: Request{CommonName: MemberIdentity("m1"), Usage: UsageServer, DNSNames: []string{"localhost"}}}
	r, err := NewRenewer(RenewerConfig{CA: func() (*CA, error) { return ca, nil }, Leaves: []Leaf{l}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RenewOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(l.Request, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(nextCert(l.CertFile), certPEM); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(l.KeyFile, keyPEM); err != nil {
		t.Fatal(err)
	}
	done, err := r.RenewOnce(context.Background())
	if err != nil || len(done) != 0 {
		t.Fatalf("pass after an interrupted write: renewed %v, %v; want the write finished and nothing due", done, err)
	}
	if got, _ := os.ReadFile(l.CertFile); !bytes.Equal(got, certPEM) {
		t.Error("the interrupted write's certificate is not in place")
	}
}

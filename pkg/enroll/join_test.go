package enroll

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

// world is a cluster with a token registry on real etcd and a join
// endpoint on real HTTPS on 127.0.0.1.
type world struct {
	t        *testing.T
	reg      *token.Registry
	ca       *pki.CA
	ep       string
	logs     *logging.Buffer
	log      *slog.Logger
	secrets  []string // every secret the test made: none may be logged
	mu       sync.Mutex
	ensured  []string
	now      time.Time
	gossip   []byte
	caKeyPEM []byte
	etcd     *etcdtest.Cluster
	observed []string // "path reason" of each request (ServerConfig.OnRequest)
}

func newWorld(t *testing.T, rate RateLimit) *world {
	t.Helper()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := secretbox.NewKey()
	box, _ := secretbox.New(key)
	w := &world{t: t, reg: token.NewRegistry(secrets.New(st, box)), logs: &logging.Buffer{}, now: time.Now(), gossip: []byte("gossip-secret-xyzzy"), etcd: cl}
	w.log = slog.New(slog.NewTextHandler(io.MultiWriter(w.logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.secrets = append(w.secrets, string(w.gossip), string(key))
	if w.ca, err = pki.NewCA("test CA", time.Hour*24, w.now); err != nil {
		t.Fatal(err)
	}
	coordCert, coordKey, _ := w.ca.Issue(pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient}, w.now)
	w.caKeyPEM = caKeyPEM(t, w.ca)
	w.secrets = append(w.secrets, string(coordKey), keyBody(w.caKeyPEM))
	srv, err := NewServer(ServerConfig{
		Tokens: w.reg,
		Signer: w.ca,
		CAPEM:  w.ca.CertPEM,
		EnsureIdentity: func(ctx context.Context, name string) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.ensured = append(w.ensured, name)
			return nil
		},
		Cluster: func(context.Context) (Cluster, error) {
			return Cluster{Endpoints: []string{"https://127.0.0.1:2379"}, GossipSecret: w.gossip, GossipGeneration: 3}, nil
		},
		ControlPlane: func(context.Context) (*Bundle, error) {
			return &Bundle{CAKeyPEM: string(w.caKeyPEM), SecretsKey: key, CoordinatorCertPEM: string(coordCert), CoordinatorKeyPEM: string(coordKey)}, nil
		},
		RateLimit: rate,
		Log:       w.log,
		OnRequest: func(path, reason string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.observed = append(w.observed, path+" "+reason)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.ep = serve(t, srv, w.ca)
	t.Cleanup(w.checkLogs)
	return w
}

// serve runs srv on 127.0.0.1 with a certificate from ca.
func serve(t *testing.T, srv *Server, ca *pki.CA) string {
	t.Helper()
	cert, err := ServerCert(ca, "test", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, cert) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func caKeyPEM(t *testing.T, ca *pki.CA) []byte {
	dir := t.TempDir()
	if err := ca.Save(dir+"/ca.crt", dir+"/ca.key"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir + "/ca.key")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keyBody is the base64 body of a PEM key: what a leaked key would show.
func keyBody(p []byte) string {
	lines := strings.Split(strings.TrimSpace(string(p)), "\n")
	return strings.Join(lines[1:len(lines)-1], "")[:40]
}

func (w *world) token(spec token.Spec, created time.Time) token.Token {
	w.t.Helper()
	tok, err := token.Generate()
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.reg.Register(context.Background(), tok, spec, created); err != nil {
		w.t.Fatal(err)
	}
	w.secrets = append(w.secrets, tok.Secret)
	return tok
}

func (w *world) client(tok token.Token, name string, roles ...api.Role) ClientConfig {
	return ClientConfig{Endpoints: []string{w.ep}, Token: tok, Name: name, Roles: roles, Log: w.log}
}

// checkLogs: no secret the test made is in any log line.
func (w *world) checkLogs() {
	logs := w.logs.String()
	if logs == "" {
		w.t.Error("nothing was logged: the check would prove nothing")
	}
	for _, s := range w.secrets {
		if strings.Contains(logs, s) {
			w.t.Errorf("a secret (%d bytes) appears in the logs", len(s))
		}
	}
}

type testWriter struct{ t *testing.T }

func (tw testWriter) Write(p []byte) (int, error) {
	tw.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var worker = token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}

func TestJoinWorker(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(worker, w.now)
	dir := pki.Dir(t.TempDir() + "/pki")
	resp, err := Obtain(context.Background(), w.client(tok, "w-1", api.RoleWorker), dir)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ControlPlane != nil || resp.GossipGeneration != 3 || len(resp.Endpoints) != 1 {
		t.Fatalf("response: %+v", resp)
	}
	for _, f := range []string{dir.CACert(), dir.Cert("node"), dir.Key("node"), GossipSecretFile(dir)} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	for _, f := range []string{dir.CAKey(), dir.SecretsKey(), dir.Cert(pki.CoordinatorLeaf)} {
		if _, err := os.Stat(f); err == nil {
			t.Fatalf("a worker got %s", f)
		}
	}
	// The node's certificate says node:w-1 and works as a client of a
	// server the CA vouches for.
	b, _ := os.ReadFile(dir.Cert("node"))
	cert, err := pki.ParseCert(b)
	if err != nil || cert.Subject.CommonName != "node:w-1" {
		t.Fatalf("node certificate: %v %v", cert, err)
	}
	if _, err := pki.ClientTLS(dir.CACert(), dir.Cert("node"), dir.Key("node")); err != nil {
		t.Fatal(err)
	}
	got, _ := w.reg.Get(context.Background(), tok.ID)
	if got.Status.Uses != 1 || got.Status.LastUsedBy != "w-1" {
		t.Fatalf("token status %+v", got.Status)
	}
	if len(w.ensured) != 1 || w.ensured[0] != "w-1" {
		t.Fatalf("EnsureIdentity calls: %v", w.ensured)
	}
	// The token is reusable until it expires or is revoked.
	if _, err := Obtain(context.Background(), w.client(tok, "w-2", api.RoleWorker), pki.Dir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
}

func TestJoinControlPlane(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(token.Spec{Roles: token.AllRoles}, w.now)
	dir := pki.Dir(t.TempDir())
	if _, err := Obtain(context.Background(), w.client(tok, "cp-2", api.RoleControlPlane), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadCA(dir.CACert(), dir.CAKey()); err != nil {
		t.Fatalf("the CA bundle: %v", err)
	}
	if _, err := secretbox.Load(dir.SecretsKey()); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.ClientTLS(dir.CACert(), dir.Cert(pki.CoordinatorLeaf), dir.Key(pki.CoordinatorLeaf)); err != nil {
		t.Fatal(err)
	}
	// A worker token asking for the control plane is refused.
	wt := w.token(worker, w.now)
	_, err := Obtain(context.Background(), w.client(wt, "cp-3", api.RoleControlPlane), pki.Dir(t.TempDir()))
	if !errors.Is(err, token.ErrRoleNotAllowed) || !strings.Contains(err.Error(), "allows roles [worker]") {
		t.Fatalf("worker token for the control plane: %v", err)
	}
}

func TestJoinRefusals(t *testing.T) {
	w := newWorld(t, RateLimit{})
	ctx := context.Background()
	valid := w.token(worker, w.now)
	revoked := w.token(worker, w.now)
	if _, err := w.reg.Revoke(ctx, revoked.ID, w.now); err != nil {
		t.Fatal(err)
	}
	expired := w.token(worker, w.now.Add(-2*time.Hour))
	unknown, _ := token.Generate()
	wrongSecret := token.Token{ID: valid.ID, Secret: strings.Repeat("x", token.SecretLen)}
	for _, c := range []struct {
		name string
		tok  token.Token
		want error
		says string
	}{
		{"revoked", revoked, token.ErrRevoked, "revoked at"},
		{"expired", expired, token.ErrExpired, "expired at"},
		{"unknown", unknown, token.ErrUnknown, "no token " + unknown.ID},
		{"wrong secret", wrongSecret, ErrCAProofMismatch, "token's secret is wrong"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Obtain(ctx, w.client(c.tok, "w-x", api.RoleWorker), pki.Dir(dir))
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want %v saying %q", err, c.want, c.says)
			}
			if strings.Contains(err.Error(), c.tok.Secret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("a refused join wrote %d files", len(entries))
			}
		})
	}
	w.secrets = append(w.secrets, unknown.Secret, wrongSecret.Secret)
}

// rawJoin sends a join body with a proof to the endpoint, pinned to its CA.
func rawJoin(t *testing.T, w *world, body []byte, proof string) error {
	t.Helper()
	hr, _ := http.NewRequest(http.MethodPost, "https://"+w.ep+PathJoin, bytes.NewReader(body))
	hr.Header.Set(ProofHeader, proof)
	var resp Response
	return do(pinned(w.ca.Pool()), hr, w.ep, &resp, nil)
}

func joinBody(t *testing.T, tok token.Token, at time.Time) []byte {
	t.Helper()
	csr, _, err := pki.NewCSR("whatever")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Request{TokenID: tok.ID, Name: "w-r", Roles: []api.Role{api.RoleWorker}, CSRPEM: string(csr), Nonce: hex.EncodeToString([]byte("0123456789abcdef")), Time: at})
	return b
}

func TestJoinReplayProofAndSkew(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(worker, w.now)
	body := joinBody(t, tok, time.Now())
	if err := rawJoin(t, w, body, mac(tok.Secret, body)); err != nil {
		t.Fatal(err)
	}
	// The same request again, byte for byte: refused.
	if err := rawJoin(t, w, body, mac(tok.Secret, body)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	// A body whose proof was made with another secret (the server side
	// of a wrong secret; the client stops earlier, at discovery).
	other := joinBody(t, tok, time.Now())
	if err := rawJoin(t, w, other, mac("not-the-secret00", other)); !errors.Is(err, ErrBadProof) {
		t.Fatalf("bad proof: %v", err)
	}
	if err := rawJoin(t, w, other, "zz"); !errors.Is(err, ErrBadProof) {
		t.Fatalf("malformed proof: %v", err)
	}
	// A tampered body: the proof no longer matches.
	tampered := bytes.Replace(body, []byte(`"w-r"`), []byte(`"w-s"`), 1)
	if err := rawJoin(t, w, tampered, mac("x", body)); !errors.Is(err, ErrBadProof) {
		t.Fatalf("tampered: %v", err)
	}
	// Too old.
	old := joinBody(t, tok, time.Now().Add(-10*time.Minute))
	if err := rawJoin(t, w, old, mac(tok.Secret, old)); !errors.Is(err, ErrClockSkew) {
		t.Fatalf("old request: %v", err)
	}
	if err := rawJoin(t, w, []byte(`{"tokenID":"abc123","extra":1}`), "00"); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestJoinRateLimit(t *testing.T) {
	w := newWorld(t, RateLimit{Burst: 3, Every: time.Hour})
	tok := w.token(worker, w.now)
	ctx := context.Background()
	// One join is two requests (discovery, join); the next join's
	// discovery is the 3rd, its join the 4th: refused.
	if _, err := Obtain(ctx, w.client(tok, "w-1", api.RoleWorker), pki.Dir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	_, err := Obtain(ctx, w.client(tok, "w-2", api.RoleWorker), pki.Dir(t.TempDir()))
	var rl *RateLimitedError
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > time.Hour {
		t.Fatalf("over the rate: %v", err)
	}
	if !strings.Contains(err.Error(), "too many join attempts") {
		t.Fatalf("message: %v", err)
	}
}

func TestJoinManInTheMiddle(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(worker, w.now)
	ctx := context.Background()

	// An impostor with its own CA, guessing the secret.
	fakeCA, _ := pki.NewCA("impostor", time.Hour, time.Now())
	impostor, err := NewServer(ServerConfig{
		Tokens:  fakeTokens{tok.ID: "guessedsecret000"},
		Signer:  fakeCA,
		CAPEM:   fakeCA.CertPEM,
		Cluster: func(context.Context) (Cluster, error) { return Cluster{}, nil },
		Log:     w.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ep := serve(t, impostor, fakeCA)
	cfg := w.client(tok, "w-1", api.RoleWorker)
	cfg.Endpoints = []string{ep}
	_, err = Obtain(ctx, cfg, pki.Dir(t.TempDir()))
	if !errors.Is(err, ErrCAProofMismatch) || !strings.Contains(err.Error(), "man in the middle") {
		t.Fatalf("impostor: %v", err)
	}

	// A relay that passes on the real endpoint's discovery answer (proof
	// included) but terminates TLS with another CA's certificate.
	relay := http.NewServeMux()
	relay.HandleFunc("GET "+PathDiscovery, func(rw http.ResponseWriter, r *http.Request) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Get("https://" + w.ep + r.URL.RequestURI())
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(rw, resp.Body)
	})
	cert, _ := ServerCert(fakeCA, "relay", []string{"127.0.0.1"}, time.Now())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := &http.Server{Handler: relay, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()
	cfg.Endpoints = []string{ln.Addr().String()}
	_, err = Obtain(ctx, cfg, pki.Dir(t.TempDir()))
	if !errors.Is(err, ErrCAProofMismatch) || !strings.Contains(err.Error(), "not from the CA it proved") {
		t.Fatalf("relay: %v", err)
	}
	// With the impostor first and the real endpoint second, the client
	// stops at the impostor: a proof mismatch is not a reason to go on.
	cfg.Endpoints = []string{ep, w.ep}
	if _, err := Obtain(ctx, cfg, pki.Dir(t.TempDir())); !errors.Is(err, ErrCAProofMismatch) {
		t.Fatalf("impostor first: %v", err)
	}
	// An unreachable endpoint first is skipped.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	cfg.Endpoints = []string{deadAddr, w.ep}
	if _, err := Obtain(ctx, cfg, pki.Dir(t.TempDir())); err != nil {
		t.Fatalf("dead endpoint first: %v", err)
	}
}

// fakeTokens is a token source of id → secret allowing workers.
type fakeTokens map[string]string

func (f fakeTokens) Get(_ context.Context, id string) (*api.Token, error) {
	s, ok := f[id]
	if !ok {
		return nil, token.ErrUnknown
	}
	t := api.NewToken(id)
	t.Spec.Secret, t.Spec.Roles = s, []api.Role{api.RoleWorker}
	return t, nil
}

func (f fakeTokens) Used(context.Context, string, string, time.Time) error { return nil }

package enroll

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// endpoint serves another join endpoint of w's cluster (its tokens and
// CA), with cfg adjusted by mod; it returns its address.
func (w *world) endpoint(mod func(*ServerConfig)) string {
	w.t.Helper()
	cfg := ServerConfig{
		Tokens:  w.reg,
		Signer:  w.ca,
		CAPEM:   w.ca.CertPEM,
		Cluster: func(context.Context) (Cluster, error) { return Cluster{GossipSecret: w.gossip}, nil },
		Log:     w.log,
	}
	mod(&cfg)
	srv, err := NewServer(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return serve(w.t, srv, w.ca)
}

// rawJoinTo sends body with its proof to endpoint ep.
func rawJoinTo(t *testing.T, w *world, ep string, body []byte, secret string) error {
	t.Helper()
	saved := w.ep
	w.ep = ep
	defer func() { w.ep = saved }()
	return rawJoin(t, w, body, mac(secret, body))
}

// freshBody is a join request for w-r with a random nonce.
func freshBody(t *testing.T, tok token.Token) []byte {
	t.Helper()
	csr, _, err := pki.NewCSR("whatever")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Request{TokenID: tok.ID, Name: "w-r", Roles: []api.Role{api.RoleWorker}, CSRPEM: string(csr), Nonce: rand.Text(), Time: time.Now()})
	return b
}

// memNonces is the memory fake of NonceStore; err, when set, fails First.
type memNonces struct {
	mu   sync.Mutex
	seen map[string]bool
	err  error
}

func (m *memNonces) First(_ context.Context, nonce string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false, m.err
	}
	if ttl != ReplayWindow {
		return false, errors.New("ttl is not the replay window")
	}
	if m.seen[nonce] {
		return false, nil
	}
	m.seen[nonce] = true
	return true, nil
}

// TestReplayToAnotherEndpoint: two endpoints sharing a NonceStore refuse a
// request accepted by the other; one whose store fails refuses it too
// (fails closed) rather than accept a possible replay.
func TestReplayToAnotherEndpoint(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(worker, w.now)
	shared := &memNonces{seen: map[string]bool{}}
	a := w.endpoint(func(c *ServerConfig) { c.Nonces = shared })
	b := w.endpoint(func(c *ServerConfig) { c.Nonces = shared })
	alone := w.endpoint(func(*ServerConfig) {})

	body := joinBody(t, tok, time.Now())
	if err := rawJoinTo(t, w, a, body, tok.Secret); err != nil {
		t.Fatal(err)
	}
	if err := rawJoinTo(t, w, b, body, tok.Secret); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay to the other endpoint: %v", err)
	}
	if err := rawJoinTo(t, w, a, body, tok.Secret); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay to the same endpoint: %v", err)
	}
	// An endpoint that does not share the record cannot tell (why the
	// agent wires EtcdNonces).
	if err := rawJoinTo(t, w, alone, body, tok.Secret); err != nil {
		t.Fatalf("endpoint without the shared record: %v", err)
	}

	broken := w.endpoint(func(c *ServerConfig) { c.Nonces = &memNonces{err: errors.New("etcd unavailable")} })
	fresh := freshBody(t, tok)
	if err := rawJoinTo(t, w, broken, fresh, tok.Secret); !errors.Is(err, ErrServer) {
		t.Fatalf("nonce store failing: %v, want the endpoint's failure", err)
	}
}

// TestJoinRefusesALiveName: a join for the name of a node whose heartbeat
// is alive is refused, saying so; once it is gone the name can be taken
// (a machine rejoining after its old heartbeat expired).
func TestJoinRefusesALiveName(t *testing.T) {
	w := newWorld(t, RateLimit{})
	tok := w.token(worker, w.now)
	var mu sync.Mutex
	alive := map[string]time.Time{"w-1": time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	ep := w.endpoint(func(c *ServerConfig) {
		c.NodeAlive = func(_ context.Context, name string) (bool, time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			at, ok := alive[name]
			return ok, at, nil
		}
	})
	cfg := w.client(tok, "w-1", api.RoleWorker)
	cfg.Endpoints = []string{ep}
	dir := t.TempDir()
	_, err := Obtain(context.Background(), cfg, pki.Dir(dir))
	if !errors.Is(err, ErrNameInUse) {
		t.Fatalf("live name: %v, want ErrNameInUse", err)
	}
	for _, says := range []string{"node w-1 is alive (heartbeat at 2026-03-04T05:06:07Z)", "a second machine cannot take its name", "nicoctl remove node w-1"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("message %q does not say %q", err, says)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused join wrote %v", entries)
	}
	mu.Lock()
	delete(alive, "w-1")
	mu.Unlock()
	if _, err := Obtain(context.Background(), cfg, pki.Dir(t.TempDir())); err != nil {
		t.Fatalf("after the heartbeat expired: %v", err)
	}

	// A failing check refuses (internal), never signs.
	failing := w.endpoint(func(c *ServerConfig) {
		c.NodeAlive = func(context.Context, string) (bool, time.Time, error) {
			return false, time.Time{}, errors.New("etcd down")
		}
	})
	body := freshBody(t, tok)
	if err := rawJoinTo(t, w, failing, body, tok.Secret); !errors.Is(err, ErrServer) {
		t.Fatalf("failing check: %v", err)
	}
}

// scoped is a client of cl scoped to the store prefix, as the agent's.
func scoped(t *testing.T, cl *etcdtest.Cluster) *store.Store {
	t.Helper()
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestEtcdNoncesAcrossEndpoints: two endpoints, each with its own client
// of one real etcd, refuse a request already accepted by the other; the
// record is a key on a lease of the replay window.
func TestEtcdNoncesAcrossEndpoints(t *testing.T) {
	w := newWorld(t, RateLimit{})
	cl := w.etcd
	tok := w.token(worker, w.now)
	a := w.endpoint(func(c *ServerConfig) { c.Nonces = NewEtcdNonces(scoped(t, cl)) })
	b := w.endpoint(func(c *ServerConfig) { c.Nonces = NewEtcdNonces(scoped(t, cl)) })

	body := joinBody(t, tok, time.Now())
	if err := rawJoinTo(t, w, a, body, tok.Secret); err != nil {
		t.Fatal(err)
	}
	if err := rawJoinTo(t, w, b, body, tok.Secret); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay to endpoint b: %v", err)
	}
	// A new request (new nonce) is accepted by b.
	if err := rawJoinTo(t, w, b, freshBody(t, tok), tok.Secret); err != nil {
		t.Fatalf("a fresh request to b: %v", err)
	}

	ctx := context.Background()
	raw := cl.Client(t)
	resp, err := raw.Get(ctx, store.DefaultPrefix+store.JoinNoncesDir, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("nonce keys: %v %v", resp, err)
	}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			t.Fatalf("nonce key %s has no lease", kv.Key)
		}
		ttl, err := raw.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil || ttl.GrantedTTL != int64(ReplayWindow/time.Second) {
			t.Fatalf("nonce lease: %+v %v, want %s", ttl, err, ReplayWindow)
		}
	}
}

// TestHeartbeatOf: the check reads the heartbeat key on its lease; a
// heartbeat that expired (its lease gone) frees the name.
func TestHeartbeatOf(t *testing.T) {
	w := newWorld(t, RateLimit{})
	cl := w.etcd
	tok := w.token(worker, w.now)
	st := scoped(t, cl)
	cli := st.Client()
	ep := w.endpoint(func(c *ServerConfig) { c.NodeAlive = HeartbeatOf(st) })
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := cli.Put(ctx, store.HeartbeatKey("w-9"), at.Format(time.RFC3339Nano), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	cfg := w.client(tok, "w-9", api.RoleWorker)
	cfg.Endpoints = []string{ep}
	_, err = Obtain(ctx, cfg, pki.Dir(t.TempDir()))
	if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), "heartbeat at 2026-01-02T03:04:05Z") {
		t.Fatalf("live w-9: %v", err)
	}
	// Another name is free.
	cfg.Name = "w-8"
	if _, err := Obtain(ctx, cfg, pki.Dir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	// The lease ends (as when the old machine died and its TTL passed).
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	cfg.Name = "w-9"
	if _, err := Obtain(ctx, cfg, pki.Dir(t.TempDir())); err != nil {
		t.Fatalf("after the heartbeat expired: %v", err)
	}
}

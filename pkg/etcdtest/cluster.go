// Package etcdtest starts real, in-process etcd members (server/v3/embed) on
// loopback ports for tests. It never mocks etcd: every member is a real server.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Member is one embedded etcd member of a test cluster.
type Member struct {
	Name      string
	DataDir   string
	PeerURL   string
	ClientURL string
	// TLS is the member's certificate files (MemberTLS); nil when plaintext.
	TLS  *member.TLS
	Etcd *embed.Etcd

	closeOnce sync.Once
}

// Close stops the member; it is safe to call more than once.
func (m *Member) Close() {
	m.closeOnce.Do(func() {
		if m.Etcd != nil {
			m.Etcd.Close()
		}
	})
}

// Cluster is a set of embedded members that form one etcd cluster.
type Cluster struct {
	Members []*Member
	t       testing.TB
}

// URLs returns a fresh peer and client URL pair on loopback: https when
// TLSDefault is set, http otherwise.
func URLs(t testing.TB) (peer, client string) {
	return URLsFor(t, TLSDefault)
}

// NewConfig returns an embed config for one member with quiet logging and
// test-friendly timings.
func NewConfig(name, dataDir, peerURL, clientURL, initialCluster, state string) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dataDir
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, err
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	cfg.InitialClusterToken = "etcdtest"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop().WithOptions(zap.WithFatalHook(member.FatalToStderr)))
	// A removed member's etcd may panic on a client call that races its
	// removal (etcd's Status: "failed to find local ID in cluster
	// members"); in a test process that would end every test. The gate
	// the embedded runtime runs behind refuses such a call instead.
	cfg.GRPCAdditionalServerOptions = member.ServerGuard(slog.New(slog.DiscardHandler))
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	return cfg, nil
}

// Options choose what StartWith starts.
type Options struct {
	Members int  // how many members; 0 means 1
	TLS     bool // https URLs, certificates from PKI(t), client and peer cert auth
	// QuotaBackendBytes is each member's database quota (0: etcd's
	// default); past it etcd raises NOSPACE.
	QuotaBackendBytes int64
}

// Start starts an n-member cluster, with TLS when TLSDefault is set, and
// waits until every member serves. The members are closed, in parallel,
// when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, Options{Members: n, TLS: TLSDefault})
}

// StartWith starts a cluster as opts say; see Start.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	n := max(opts.Members, 1)
	c := &Cluster{t: t}
	var parts []string
	for i := 0; i < n; i++ {
		peer, client := URLsFor(t, opts.TLS)
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			DataDir:   filepath.Join(t.TempDir(), "etcd"),
			PeerURL:   peer,
			ClientURL: client,
		}
		m.TLS = MemberTLS(t, m.Name, peer, client)
		c.Members = append(c.Members, m)
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	t.Cleanup(c.Close)
	initial := strings.Join(parts, ",")
	errs := make(chan error, n)
	for _, m := range c.Members {
		go func(m *Member) {
			cfg, err := NewConfig(m.Name, m.DataDir, m.PeerURL, m.ClientURL, initial, embed.ClusterStateFlagNew)
			if err != nil {
				errs <- err
				return
			}
			applyTLS(cfg, m.TLS)
			cfg.QuotaBackendBytes = opts.QuotaBackendBytes
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				errs <- fmt.Errorf("start %s: %w", m.Name, err)
				return
			}
			m.Etcd = e
			select {
			case <-e.Server.ReadyNotify():
				errs <- nil
			case <-time.After(30 * time.Second):
				errs <- fmt.Errorf("member %s not ready after 30s", m.Name)
			}
		}(m)
	}
	for range c.Members {
		if err := <-errs; err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	return c
}

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client for the whole cluster, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.Endpoints()...)
}

// NewClient returns a quiet client for the endpoints, closed when the test
// ends. For https endpoints it presents a root client certificate from
// PKI(t) (CN "root", etcd's root user).
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	var tlsCfg *tls.Config
	if anyHTTPS(endpoints) {
		tlsCfg = rootTLS(t)
	}
	// Through etcdclient, so that clients dialled from it (etcdadmin) carry
	// the same identity.
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg})
	if err != nil {
		t.Fatalf("etcdtest client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Close stops every member in parallel (each can take seconds).
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Add(1)
		go func(m *Member) { defer wg.Done(); m.Close() }(m)
	}
	wg.Wait()
}

// WaitLeader waits until some member reports a leader, and returns its ID.
func WaitLeader(ctx context.Context, cli *clientv3.Client, endpoint string) (uint64, error) {
	for {
		st, err := cli.Status(ctx, endpoint)
		if err == nil && st.Leader != 0 {
			return st.Leader, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no leader at %s: %w", endpoint, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

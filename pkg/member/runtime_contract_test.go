package member_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Test timings: fast elections, and generous bounds that only stop a hung test.
const (
	testTick     = 50 * time.Millisecond
	testElection = 500 * time.Millisecond
	caseTimeout  = 90 * time.Second
)

// lifecycleContract runs the cases every Runtime, fakes included, must pass.
func lifecycleContract(t *testing.T, rs runtimes) {
	t.Run("StopBeforeStart", func(t *testing.T) { testStopBeforeStart(t, rs) })
	t.Run("StartStopStartAgain", func(t *testing.T) { testLifecycle(t, rs) })
	t.Run("CanceledContext", func(t *testing.T) { testCanceledContext(t, rs) })
}

// runtimeContract runs the cases every real Runtime must pass, against real
// etcd members on loopback.
func runtimeContract(t *testing.T, rs runtimes) {
	lifecycleContract(t, rs)
	t.Run("PutStopRestart", func(t *testing.T) { testPutStopRestart(t, rs) })
	t.Run("LearnerJoinsAndIsRemoved", func(t *testing.T) { testLearnerRemoved(t, rs) })
	t.Run("RemovedWhilePolled", func(t *testing.T) { testRemovedWhilePolled(t, rs) })
	t.Run("PortInUse", func(t *testing.T) { testPortInUse(t, rs) })
	t.Run("DataDirIsAFile", func(t *testing.T) { testBadDataDir(t, rs) })
	t.Run("QuotaBackendBytes", func(t *testing.T) { testQuota(t, rs) })
	if rs.tls {
		t.Run("ClientCertificateRequired", func(t *testing.T) { testClientCertRequired(t, rs) })
		t.Run("RestartWithAuthEnabled", func(t *testing.T) { testRestartWithAuth(t, rs) })
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
}

// runtimes makes the Runtimes a contract runs against, plain or with TLS.
type runtimes struct {
	new func() member.Runtime
	tls bool // https URLs, certificates, client and peer cert auth
}

// plain and withTLS wrap a Runtime constructor for the contracts: plain
// members use http, withTLS members https with client and peer certificate
// authentication (etcdtest.MemberTLS).
func plain(f func() member.Runtime) runtimes   { return runtimes{new: f} }
func withTLS(f func() member.Runtime) runtimes { return runtimes{new: f, tls: true} }

// config returns a Config for a fresh member on free loopback ports.
func (rs runtimes) config(t *testing.T, name string) member.Config {
	return configFor(t, name, rs.tls)
}

// newConfig returns a Config for a fresh member on free loopback ports,
// with TLS when etcdtest.TLSDefault is set.
func newConfig(t *testing.T, name string) member.Config {
	return configFor(t, name, etcdtest.TLSDefault)
}

func configFor(t *testing.T, name string, useTLS bool) member.Config {
	peer, client := etcdtest.URLsFor(t, useTLS)
	return member.Config{
		TLS:          etcdtest.MemberTLS(t, name, peer, client),
		Name:         name,
		DataDir:      filepath.Join(t.TempDir(), name),
		PeerURL:      peer,
		ClientURL:    client,
		ClusterState: member.StateNew,
		ClusterToken: "contract-" + name,
		Logger:       testLogger(t),
	}
}

func caseContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// stopAll stops runtimes in parallel when the test ends (each can take seconds).
func stopAll(t *testing.T, rts ...member.Runtime) {
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, rt := range rts {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
				defer cancel()
				if err := rt.Stop(ctx); err != nil {
					t.Errorf("cleanup stop: %v", err)
				}
			})
		}
		wg.Wait()
	})
}

// waitDone waits for rt to exit, failing the test when ctx ends first.
func waitDone(ctx context.Context, t *testing.T, rt member.Runtime) {
	t.Helper()
	select {
	case <-rt.Done():
	case <-ctx.Done():
		t.Fatalf("member did not exit: %v", ctx.Err())
	}
}

// assertFree fails when something still listens on a URL's port.
func assertFree(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Errorf("%s still in use after a failed start: %v", raw, err)
		return
	}
	l.Close()
}

func testStopBeforeStart(t *testing.T, rs runtimes) {
	rt := rs.new()
	if err := rt.Stop(caseContext(t)); err != nil {
		t.Fatalf("Stop before Start = %v, want nil", err)
	}
	select {
	case <-rt.Done():
	default:
		t.Fatal("Done before Start is not closed")
	}
	if err := rt.Err(); err != nil {
		t.Fatalf("Err before Start = %v, want nil", err)
	}
}

func testLifecycle(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	rt := rs.new()
	stopAll(t, rt)
	cfg := rs.config(t, "life")
	for round := range 2 {
		if err := rt.Start(ctx, cfg); err != nil {
			t.Fatalf("Start (round %d): %v", round, err)
		}
		select {
		case <-rt.Done():
			t.Fatalf("Done closed while running (round %d); Err = %v", round, rt.Err())
		default:
		}
		if err := rt.Err(); err != nil {
			t.Fatalf("Err while running = %v, want nil", err)
		}
		if err := rt.Start(ctx, cfg); !errors.Is(err, member.ErrRunning) {
			t.Fatalf("Start while running = %v, want ErrRunning", err)
		}
		for i := range 2 {
			if err := rt.Stop(ctx); err != nil {
				t.Fatalf("Stop #%d (round %d): %v", i+1, round, err)
			}
		}
		waitDone(ctx, t, rt)
		if err := rt.Err(); err != nil {
			t.Fatalf("Err after Stop = %v, want nil", err)
		}
	}
}

func testPutStopRestart(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	rt := rs.new()
	stopAll(t, rt)
	cfg := rs.config(t, "solo")
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := rt.Start(ctx, cfg); !errors.Is(err, member.ErrRunning) {
		t.Fatalf("second Start = %v, want ErrRunning", err)
	}
	if has, err := member.HasData(cfg.DataDir); err != nil || !has {
		t.Fatalf("HasData(%s) = %v, %v; want true", cfg.DataDir, has, err)
	}
	cli := etcdtest.NewClient(t, cfg.ClientURL)
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("Put: %v", err)
	}

	for i := range 2 {
		if err := rt.Stop(ctx); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	waitDone(ctx, t, rt)
	if err := rt.Err(); err != nil {
		t.Fatalf("Err after Stop = %v, want nil", err)
	}

	// The same Runtime starts again; a member with data ignores the initial
	// cluster flags, so asking for a "new" cluster keeps the data.
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("restart: %v", err)
	}
	select {
	case <-rt.Done():
		t.Fatalf("Done closed right after restart; Err = %v", rt.Err())
	default:
	}
	cli2 := etcdtest.NewClient(t, cfg.ClientURL)
	resp, err := cli2.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("Get after restart = %v, want k=v1", resp.Kvs)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop after restart: %v", err)
	}
	if err := rt.Err(); err != nil {
		t.Fatalf("Err after the Stop that followed a restart = %v, want nil", err)
	}
}

func testLearnerRemoved(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	a, b := rs.new(), rs.new()
	stopAll(t, a, b)
	cfgA := rs.config(t, "a")
	if err := a.Start(ctx, cfgA); err != nil {
		t.Fatalf("start a: %v", err)
	}
	cli := etcdtest.NewClient(t, cfgA.ClientURL)

	cfgB := rs.config(t, "b")
	added := memberAddAsLearner(ctx, t, cli, cfgB.PeerURL)
	var parts []string
	for _, m := range added.Members {
		name := m.Name
		if m.ID == added.Member.ID {
			name = cfgB.Name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	cfgB.InitialCluster = strings.Join(parts, ",")
	cfgB.ClusterState = member.StateExisting
	cfgB.ClusterToken = cfgA.ClusterToken
	if err := b.Start(ctx, cfgB); err != nil {
		t.Fatalf("start learner b: %v", err)
	}
	st, err := cli.Status(ctx, cfgB.ClientURL)
	if err != nil {
		t.Fatalf("status of b: %v", err)
	}
	if !st.IsLearner {
		t.Fatalf("b serves but is not a learner: %+v", st)
	}

	if _, err := cli.MemberRemove(ctx, added.Member.ID); err != nil {
		t.Fatalf("remove b: %v", err)
	}
	waitDone(ctx, t, b)
	if err := b.Err(); !errors.Is(err, member.ErrRemoved) {
		t.Fatalf("b.Err() = %v, want ErrRemoved", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("Stop after removal: %v", err)
	}
	if err := b.Err(); !errors.Is(err, member.ErrRemoved) {
		t.Fatalf("b.Err() after Stop = %v, want ErrRemoved still", err)
	}
	select {
	case <-a.Done():
		t.Fatalf("a exited: %v", a.Err())
	default:
	}

	// A removed member that comes back with its old data is told so by the
	// cluster and does not start.
	err = b.Start(ctx, cfgB)
	t.Logf("restart of removed b: %v", err)
	if !errors.Is(err, member.ErrRemoved) {
		t.Fatalf("restart of removed b = %v, want ErrRemoved", err)
	}
	if !errors.Is(b.Err(), member.ErrRemoved) {
		t.Fatalf("b.Err() after failed restart = %v, want ErrRemoved", b.Err())
	}
}

// memberAddAsLearner retries while a young cluster refuses reconfiguration
// ("unhealthy cluster" until its members have been connected long enough).
func memberAddAsLearner(ctx context.Context, t *testing.T, cli *clientv3.Client, peerURL string) *clientv3.MemberAddResponse {
	t.Helper()
	backoff := 100 * time.Millisecond
	for {
		resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil {
			return resp
		}
		t.Logf("MemberAddAsLearner: %v (retrying)", err)
		select {
		case <-ctx.Done():
			t.Fatalf("MemberAddAsLearner: %v: %v", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func testPortInUse(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := rs.config(t, "busy")
	cfg.ClientURL = strings.SplitN(cfg.ClientURL, "://", 2)[0] + "://" + l.Addr().String()
	rt := rs.new()
	stopAll(t, rt)
	err = rt.Start(ctx, cfg)
	if err == nil {
		t.Fatal("Start on a busy client port succeeded")
	}
	if !strings.Contains(err.Error(), cfg.ClientURL) {
		t.Errorf("Start error %q does not name %s", err, cfg.ClientURL)
	}
	assertStartFailedClean(t, rt, cfg)
}

func testBadDataDir(t *testing.T, rs runtimes) {
	ctx := caseContext(t)
	cfg := rs.config(t, "file")
	if err := os.WriteFile(cfg.DataDir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := rs.new()
	stopAll(t, rt)
	err := rt.Start(ctx, cfg)
	if err == nil {
		t.Fatal("Start with a file as data dir succeeded")
	}
	t.Logf("Start error: %v", err)
	assertStartFailedClean(t, rt, cfg)
	assertFree(t, cfg.ClientURL)
}

func testCanceledContext(t *testing.T, rs runtimes) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := rs.config(t, "canceled")
	rt := rs.new()
	stopAll(t, rt)
	if err := rt.Start(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with canceled ctx = %v, want context.Canceled", err)
	}
	assertStartFailedClean(t, rt, cfg)
	assertFree(t, cfg.ClientURL)
}

// assertStartFailedClean checks that a failed Start left nothing running.
func assertStartFailedClean(t *testing.T, rt member.Runtime, cfg member.Config) {
	t.Helper()
	select {
	case <-rt.Done():
	default:
		t.Fatal("Done not closed after a failed Start")
	}
	if rt.Err() == nil {
		t.Error("Err is nil after a failed Start")
	}
	assertFree(t, cfg.PeerURL)
	if err := rt.Stop(context.Background()); err != nil {
		t.Errorf("Stop after failed Start: %v", err)
	}
}

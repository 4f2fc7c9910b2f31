package agent

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldRuntime is a member runtime whose Done can be held once: the first
// call after hold blocks until the test releases it, which keeps the
// agent's member controller (agent/supervise.go) in its reconcile for as
// long as the test needs.
type heldRuntime struct {
	member.Runtime
	mu      sync.Mutex
	held    chan struct{} // closed by the test: the held Done returns
	entered chan struct{} // closed when a Done call is held
}

func (r *heldRuntime) hold() (entered, release chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held, r.entered = make(chan struct{}), make(chan struct{})
	return r.entered, r.held
}

func (r *heldRuntime) Done() <-chan struct{} {
	r.mu.Lock()
	held, entered := r.held, r.entered
	r.held, r.entered = nil, nil
	r.mu.Unlock()
	if held != nil {
		close(entered)
		<-held
	}
	return r.Runtime.Done()
}

// bootstrapAgent runs a bootstrap control-plane agent on plaintext
// loopback URLs and waits until it is healthy.
func bootstrapAgent(ctx context.Context, t *testing.T, rt member.Runtime) (a *Agent, cfg Config, done chan error) {
	t.Helper()
	peer, client := etcdtest.URLsFor(t, false)
	cfg = Config{
		Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true,
		DataDir: filepath.Join(t.TempDir(), "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "shutdown-test", DialTimeout: 3 * time.Second, HeartbeatTTL: 2 * time.Second,
		RetryInterval: 200 * time.Millisecond, Version: "test",
	}
	a = New(cfg, rt, quietNotifier{}, logging.Test(t))
	done = make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, 60*time.Second, "agent healthy", func() bool {
		select {
		case err := <-done:
			t.Fatalf("agent stopped before it was healthy: %v", err)
		default:
		}
		return a.Healthy()
	})
	return a, cfg, done
}

// TestRunReturnsWhenHeartbeatAndShutdownMeet: the agent is stopped while its
// member controller is busy, so that when it is done both the end of ctx
// and the end of the heartbeat are ready. Were the heartbeat's end sent on
// a channel that both supervise and Run's deferred wait receive from,
// then when supervise took it, Run would return "heartbeat
// stopped: %!w(<nil>)" into a defer that waited for it forever. Each round
// has even odds of meeting that case; four rounds make it all but certain.
func TestRunReturnsWhenHeartbeatAndShutdownMeet(t *testing.T) {
	for round := range 4 {
		rt := &heldRuntime{Runtime: member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))}
		ctx, cancel := context.WithCancel(context.Background())
		_, cfg, done := bootstrapAgent(ctx, t, rt)
		cli := etcdtest.NewClient(t, cfg.ClientURL)
		st, err := store.New(cli, store.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}

		// Wake the node's controllers (a removal request still pending:
		// nothing to do)
		// and hold it before its select.
		entered, release := rt.hold()
		if err := st.Put(t.Context(), store.RemovalKey(cfg.Name), api.NewRemoveRequest(cfg.Name)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the member controller did not reconcile")
		}
		cancel()
		// The heartbeat's last act is revoking its lease, which deletes
		// the heartbeat key.
		waitFor(t, 30*time.Second, "heartbeat revoked", func() bool {
			resp, err := cli.Get(t.Context(), store.HeartbeatKey(cfg.Name), clientv3.WithCountOnly())
			return err == nil && resp.Count == 0
		})
		close(release)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Run returned %v, want nil after ctx ended", round, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Run did not return within 30 s of its ctx ending", round)
		}
		waitMemberExited(t, rt)
	}
}

// waitMemberExited waits for the agent's member to exit, so the test's
// data dir is not removed under a running etcd.
func waitMemberExited(t *testing.T, rt member.Runtime) {
	t.Helper()
	select {
	case <-rt.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("member did not exit within 60 s of its agent")
	}
}

// TestRunReturnsNilWhenStoppedWhileJoining: an agent stopped while it
// waits for the leader to add its learner (no coordinator runs here) is
// stopped, not failed: Run returns nil. It returned context.Canceled from
// the join, and from the identity retried after it, so nico-agent exited 1
// ("agent failed") on a plain stop, and a test fleet's Stop failed
// (TestVoterWhoseOnlySeedWasRemovedRejoinsTheMesh, one fresh run in two).
func TestRunReturnsNilWhenStoppedWhileJoining(t *testing.T) {
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, first, _ := bootstrapAgent(ctx, t, rt)
	defer waitMemberExited(t, rt)

	peer, client := etcdtest.URLsFor(t, false)
	cfg := Config{
		Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, Endpoints: []string{first.ClientURL},
		DataDir: filepath.Join(t.TempDir(), "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "shutdown-test", DialTimeout: 3 * time.Second, HeartbeatTTL: 2 * time.Second,
		RetryInterval: 200 * time.Millisecond, Version: "test",
	}
	jctx, jcancel := context.WithCancel(context.Background())
	defer jcancel()
	done := make(chan error, 1)
	go func() {
		done <- New(cfg, member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond)), quietNotifier{}, logging.Test(t)).Run(jctx)
	}()
	cli := etcdtest.NewClient(t, first.ClientURL)
	waitFor(t, 30*time.Second, "cp-2's join request filed", func() bool {
		resp, err := cli.Get(t.Context(), store.DefaultPrefix+store.JoinKey("cp-2"), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	})
	jcancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil: the agent was stopped while it waited for its learner", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its ctx ending")
	}
	cancel()
}

package switchcheck

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/store/memetcd"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// syncBuffer is the check's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	cl *etcdtest.Cluster
	st *store.Store
}

func newEnv(t *testing.T) *env {
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, cl.Endpoints()...)
	t.Cleanup(func() { cli.Close() })
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	n := api.NewNode("cp-1")
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Spec.PeerURL = cl.Members[0].PeerURL
	if err := st.Put(t.Context(), store.NodeKey("cp-1"), n); err != nil {
		t.Fatal(err)
	}
	return &env{cl: cl, st: st}
}

// check is cp-1's check of a switch to a new toplevel, on e's store.
func (e *env) check(out *syncBuffer, clk clockwork.Clock) *Check {
	return &Check{Node: "cp-1", ControlPlane: true, PeerURL: e.cl.Members[0].PeerURL, Toplevel: "/nix/store/new-system", Action: "switch",
		CurrentSystem: "/nonexistent/current-system", Wait: time.Minute, AnswerTimeout: 10 * time.Second,
		Store: e.st, Clock: clk, Out: out}
}

func (e *env) requestGone(t *testing.T) {
	t.Helper()
	err := e.st.Get(t.Context(), store.SwitchKey("cp-1"), &api.SwitchRequest{})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the request is still there (%v); want it withdrawn", err)
	}
}

// run runs c in the background; the returned func waits for its status.
func run(t *testing.T, c *Check) func() int {
	done := make(chan int, 1)
	go func() { done <- c.Run(t.Context()) }()
	return func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("the check did not end")
			return -1
		}
	}
}

// TestNoCoordinatorAnswersAVoterHost: with etcd up but no coordinator, the
// check of a host whose member is in etcd's member list refuses once its
// answer timeout passed, naming the override, and withdraws its request;
// a host with no member then switches; the override switches at once
// without writing anything.
func TestNoCoordinatorAnswersAVoterHost(t *testing.T) {
	e := newEnv(t)
	clk := clockwork.NewFakeClock()
	out := &syncBuffer{}
	wait := run(t, e.check(out, clk))
	testwait.True(t, 10*time.Second, "the check asked", func() bool { return strings.Contains(out.String(), "asks for the switch slot") })
	if err := clk.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if code := wait(); code != Refused || !strings.Contains(out.String(), "no coordinator answered within 10s") || !strings.Contains(out.String(), "NICO_SWITCH_GUARD=off") {
		t.Fatalf("exit %d, output:\n%s\nwant %d, no coordinator answered, the override named", code, out, Refused)
	}
	e.requestGone(t)

	out = &syncBuffer{}
	c := e.check(out, clk)
	c.PeerURL = "https://10.9.9.9:2380" // not a member
	wait = run(t, c)
	testwait.True(t, 10*time.Second, "the check asked", func() bool { return strings.Contains(out.String(), "asks for the switch slot") })
	if err := clk.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if code := wait(); code != Proceed {
		t.Fatalf("a host with no member: exit %d, output:\n%s", code, out)
	}

	out = &syncBuffer{}
	c = e.check(out, clk)
	c.Override = true
	if code := c.Run(t.Context()); code != Proceed || !strings.Contains(out.String(), "NICO_SWITCH_GUARD=off is set") {
		t.Fatalf("override: exit %d, output:\n%s", code, out)
	}
	e.requestGone(t)
}

// TestNoEtcdAnswers: with no store at all, a host keeping a member's data
// refuses and one without switches, asking no one; a data-plane host, another action or
// the running generation never ask.
func TestNoEtcdAnswers(t *testing.T) {
	dial := func(context.Context) (*store.Store, error) { return nil, errors.New("connection refused") }
	cur := filepath.Join(t.TempDir(), "current-system")
	if err := os.Symlink(t.TempDir(), cur); err != nil {
		t.Fatal(err)
	}
	target, _ := filepath.EvalSymlinks(cur)
	for _, tc := range []struct {
		name   string
		change func(*Check)
		want   int
		says   string
	}{
		{"a member's data here", func(c *Check) { c.LocalMember = func() bool { return true } }, Refused, "switching blind"},
		{"no member here", func(c *Check) { c.LocalMember = func() bool { return false } }, Proceed, "keeps no etcd member's data"},
		{"data plane", func(c *Check) { c.ControlPlane = false }, Proceed, "no controlPlane role"},
		{"boot", func(c *Check) { c.Action = "boot" }, Proceed, "restarts nothing now"},
		{"the running generation", func(c *Check) { c.Toplevel = target }, Proceed, "already runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &syncBuffer{}
			c := &Check{Node: "cp-1", ControlPlane: true, Toplevel: "/nix/store/new-system", Action: "switch", CurrentSystem: cur,
				Wait: time.Minute, AnswerTimeout: time.Second, Dial: dial, LocalMember: func() bool { return true }, Out: out}
			tc.change(c)
			if code := c.Run(t.Context()); code != tc.want || !strings.Contains(out.String(), tc.says) {
				t.Fatalf("exit %d, output:\n%s\nwant %d saying %q", code, out, tc.want, tc.says)
			}
		})
	}
}

// TestMinorVersionChangeIsRefused (real etcd binaries of two minor
// versions): a generation whose etcd.binary reports another minor version
// is refused, pointing to the EtcdCluster's spec.version; the same binary
// is not asked.
func TestMinorVersionChangeIsRefused(t *testing.T) {
	bins := etcdtest.Binaries(t)
	if len(bins) < 2 || bins[0].Version[:3] == bins[len(bins)-1].Version[:3] {
		t.Fatalf("want etcd binaries of two minor versions, have %v", bins)
	}
	out := &syncBuffer{}
	c := &Check{Node: "cp-1", ControlPlane: true, Toplevel: "/nix/store/new-system", Action: "switch", CurrentSystem: "/nonexistent",
		CurrentEtcd: bins[0].Path, NewEtcd: bins[len(bins)-1].Path, EtcdVersion: member.BinaryVersion, Out: out}
	if code := c.Run(t.Context()); code != Refused || !strings.Contains(out.String(), "spec.version") || !strings.Contains(out.String(), bins[0].Version) {
		t.Fatalf("exit %d, output:\n%s\nwant %d pointing to spec.version", code, out, Refused)
	}
}

// TestGrantedByTheLeader (real etcd, a real coordinator): the check of the
// only voter is granted (it switches in place) and exits 0; while a
// defragmentation holds the slot, the check shows the leader's reason and
// gives up at its wait, withdrawing its request.
func TestGrantedByTheLeader(t *testing.T) {
	e := newEnv(t)
	cli := etcdtest.Dial(t, pki.CoordinatorIdentity, 0, e.cl.Endpoints()...)
	defer cli.Close()
	cst, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	co := coordinator.New(coordinator.Config{Name: "c", ResyncInterval: 100 * time.Millisecond, HealthTimeout: time.Second}, cst, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	defer func() { cancel(); <-done }()

	out := &syncBuffer{}
	c := e.check(out, clockwork.NewRealClock())
	if code := c.Run(t.Context()); code != Proceed || !strings.Contains(out.String(), "only voter") {
		t.Fatalf("exit %d, output:\n%s\nwant granted in place", code, out)
	}
	r := &api.SwitchRequest{}
	if err := e.st.Get(t.Context(), store.SwitchKey("cp-1"), r); err != nil || r.Status.Phase != api.SwitchGranted {
		t.Fatalf("request %+v, %v; want Granted", r.Status, err)
	}
	// The host reports its switch done, as its agent does: the slot goes.
	r.Spec.SwitchedAt = time.Now()
	if err := e.st.Update(t.Context(), store.SwitchKey("cp-1"), r); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the slot released", func() (bool, string) {
		op, err := e.st.ActiveOp(t.Context())
		if err != nil || op != nil {
			return false, "slot held"
		}
		return true, ""
	})

	// Another host's rollout step holds the slot (of no rollout: nothing
	// in the coordinator ends it).
	held := api.NewOperation("rollout-r1-1")
	held.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: "dp-7", Request: "r1"}
	held.Status = api.OperationStatus{Phase: api.OpRunning, StepSince: time.Now()}
	put, err := store.PutObjectOp(held)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Txn(t.Context(), nil, put, clientv3.OpPut(store.ActiveOpKey, held.Metadata.Name)); err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClock()
	out = &syncBuffer{}
	c = e.check(out, clk)
	c.AnswerTimeout = time.Hour
	wait := run(t, c)
	testwait.True(t, 10*time.Second, "the leader's reason shown", func() bool {
		return strings.Contains(out.String(), "the rollout step on dp-7 (operation rollout-r1-1)")
	})
	clk.Advance(time.Minute)
	if code := wait(); code != Failed || !strings.Contains(out.String(), "still waiting after 1m0s") {
		t.Fatalf("exit %d, output:\n%s\nwant %d, still waiting", code, out, Failed)
	}
	e.requestGone(t)
}

// TestATransientWriteIsMadeAgain: a request write that etcd failed in a
// way that passes by itself (a request timed out while a leader moved) is
// made again until it is written; one whose answer was lost after it took
// effect is found by the next read and not written twice; any other
// error refuses at once.
func TestATransientWriteIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   memetcd.Fault
		retries int
		version int64
	}{
		{"timed out twice", memetcd.Fault{Times: 2, Err: rpctypes.ErrTimeout}, 2, 1},
		{"leader changed", memetcd.Fault{Times: 1, Err: rpctypes.ErrLeaderChanged}, 1, 1},
		{"answer lost after it took effect", memetcd.Fault{Times: 1, Err: rpctypes.ErrTimeout, Applied: true}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			faults := &memetcd.Faults{}
			faults.Wrap(e.st.Client())
			f := tc.fault
			f.Kinds, f.Prefix = memetcd.Txn, store.SwitchesDir
			faults.Add(f)
			clk := clockwork.NewFakeClock()
			out := &syncBuffer{}
			wait := run(t, e.check(out, clk))
			for i := range tc.retries {
				testwait.True(t, 10*time.Second, "the check writing again", func() bool {
					return strings.Count(out.String(), "writing it again") == i+1
				})
				if err := clk.BlockUntilContext(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				clk.Advance(retryWrite)
			}
			testwait.True(t, 10*time.Second, "the check asked", func() bool { return strings.Contains(out.String(), "asks for the switch slot") })
			kv, err := e.st.GetKV(t.Context(), store.SwitchKey("cp-1"))
			if err != nil {
				t.Fatal(err)
			}
			if kv.Version != tc.version {
				t.Fatalf("the request was written %d times, want %d", kv.Version, tc.version)
			}
			if n := faults.Failed(); n != tc.retries {
				t.Fatalf("%d writes failed, want %d", n, tc.retries)
			}
			// No coordinator: the voter host refuses once its answer
			// timeout passes.
			if err := clk.BlockUntilContext(t.Context(), 2); err != nil {
				t.Fatal(err)
			}
			clk.Advance(10 * time.Second)
			if code := wait(); code != Refused || !strings.Contains(out.String(), "no coordinator answered") {
				t.Fatalf("exit %d, output:\n%s\nwant %d, no coordinator answered", code, out, Refused)
			}
			e.requestGone(t)
		})
	}

	t.Run("permission denied", func(t *testing.T) {
		e := newEnv(t)
		faults := &memetcd.Faults{}
		faults.Wrap(e.st.Client())
		faults.Add(memetcd.Fault{Kinds: memetcd.Txn, Prefix: store.SwitchesDir, Times: 1, Err: rpctypes.ErrPermissionDenied})
		out := &syncBuffer{}
		if code := e.check(out, clockwork.NewFakeClock()).Run(t.Context()); code != Refused ||
			!strings.Contains(out.String(), "the request could not be written") || strings.Contains(out.String(), "writing it again") {
			t.Fatalf("exit %d, output:\n%s\nwant %d at once, the write's error named", code, out, Refused)
		}
	})
}

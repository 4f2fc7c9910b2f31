package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// switchEnv is three real etcd members registered as cp-1..cp-3 and one
// data-plane node, dp-1, with no member.
type switchEnv struct {
	t   *testing.T
	cl  *etcdtest.Cluster
	st  *store.Store
	clk *clockwork.FakeClock
}

func newSwitchEnv(t *testing.T) *switchEnv {
	cl := etcdtest.Start(t, 3)
	st := dialStore(t, cl)
	for i, m := range cl.Members {
		putNode(t, st, fmt.Sprintf("cp-%d", i+1), m.PeerURL)
	}
	dp := api.NewNode("dp-1")
	dp.Spec.Roles = []api.Role{api.RoleWorker}
	if err := st.Put(t.Context(), store.NodeKey("dp-1"), dp); err != nil {
		t.Fatal(err)
	}
	return &switchEnv{t: t, cl: cl, st: st, clk: clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
}

// guard is a switch-guard controller under a fence of its own, driven pass
// by pass at the fake clock's time.
func (e *switchEnv) guard() *switchGuard {
	key := fmt.Sprintf("election/test-%d", time.Now().UnixNano())
	resp, err := e.st.Client().Put(e.t.Context(), key, "g")
	if err != nil {
		e.t.Fatal(err)
	}
	c := New(Config{Name: "g", HealthTimeout: time.Second, Clock: e.clk}, e.st, slog.New(slog.DiscardHandler))
	return newSwitchGuard(c.leaderDeps(store.Fence{Key: key, Rev: resp.Header.Revision}))
}

// pass runs reconcile until it plans nothing new (at most 10 times).
func (e *switchEnv) pass(g *switchGuard) {
	e.t.Helper()
	for range 10 {
		if err := g.reconcile(e.t.Context()); err != nil {
			e.t.Fatal(err)
		}
		if strings.HasPrefix(g.last, "None") || strings.HasPrefix(g.last, "Wait") {
			return
		}
	}
}

// ask files node's request, attempt a.
func (e *switchEnv) ask(node, a string, hold time.Duration) {
	e.t.Helper()
	r := api.NewSwitchRequest(node)
	r.Spec = api.SwitchRequestSpec{Attempt: a, Toplevel: "/nix/store/new-" + node, Action: "switch", Hold: api.Duration(hold), RequestedAt: e.clk.Now()}
	if err := e.st.Put(e.t.Context(), store.SwitchKey(node), r); err != nil {
		e.t.Fatal(err)
	}
}

func (e *switchEnv) request(node string) *api.SwitchRequest {
	e.t.Helper()
	r := &api.SwitchRequest{}
	if err := e.st.Get(e.t.Context(), store.SwitchKey(node), r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// switched marks node's ask done, as its agent does once its member is
// healthy on the new generation.
func (e *switchEnv) switched(node string) {
	e.t.Helper()
	r := e.request(node)
	r.Spec.SwitchedAt = e.clk.Now()
	if err := e.st.Put(e.t.Context(), store.SwitchKey(node), r); err != nil {
		e.t.Fatal(err)
	}
}

func (e *switchEnv) active() string {
	e.t.Helper()
	op, err := e.st.ActiveOp(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	if op == nil {
		return ""
	}
	return op.Metadata.Name
}

func (e *switchEnv) want(node string, phase api.SwitchPhase, msg string) *api.SwitchRequest {
	e.t.Helper()
	r := e.request(node)
	if !r.Answered() || r.Status.Phase != phase || !strings.Contains(r.Status.Message, msg) {
		e.t.Fatalf("%s: status %+v, want phase %s with %q", node, r.Status, phase, msg)
	}
	return r
}

// TestSwitchGuard runs the switch-guard controller pass by pass on three
// real etcd members (one cluster for every case: each starts from no
// request and a free slot).
func TestSwitchGuard(t *testing.T) {
	t.Parallel()
	e := newSwitchEnv(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *switchEnv)
	}{
		{"a switch is held while a join is in flight; a data-plane host is not", switchHeldWhileAJoinIsInFlight},
		{"a host that never reports healthy gives the slot back at its deadline", switchSlotTakenBackAtItsDeadline},
		{"the leader's host is granted once leadership moved", switchOfTheLeaderMovesLeadershipFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := e.st.Client()
			for _, k := range []string{store.SwitchesDir, store.ActiveOpKey} {
				if _, err := cli.Delete(t.Context(), k, clientv3.WithPrefix()); err != nil {
					t.Fatal(err)
				}
			}
			sub := *e
			sub.t = t
			tc.run(t, &sub)
		})
	}
}

// switchHeldWhileAJoinIsInFlight: a join holding the slot
// holds a switch, named in its answer; once it ends the switch is granted.
// A data-plane host is granted at once meanwhile, taking nothing.
func switchHeldWhileAJoinIsInFlight(t *testing.T, e *switchEnv) {
	g := e.guard()
	join := api.NewOperation("join-cp-4-1")
	join.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-4"}
	join.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepLearner}
	put, err := store.PutObjectOp(join)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Client().Txn(t.Context()).Then(put, clientv3.OpPut(store.ActiveOpKey, join.Metadata.Name)).Commit(); err != nil {
		t.Fatal(err)
	}
	e.ask("cp-2", "a1", 0)
	e.ask("dp-1", "a1", 0)
	e.pass(g)
	e.want("cp-2", api.SwitchWaiting, "the join of cp-4 (operation join-cp-4-1)")
	if r := e.want("dp-1", api.SwitchGranted, "runs no etcd member"); r.Status.Operation != "" {
		t.Fatalf("dp-1 granted under %q, want no operation", r.Status.Operation)
	}
	if a := e.active(); a != join.Metadata.Name {
		t.Fatalf("the slot is held by %q, want the join still", a)
	}
	if _, err := e.st.Client().Delete(t.Context(), store.ActiveOpKey); err != nil {
		t.Fatal(err)
	}
	e.pass(g)
	r := e.want("cp-2", api.SwitchGranted, "quorum holds")
	if a := e.active(); a != r.Status.Operation || a != "switch-cp-2-a1" {
		t.Fatalf("slot held by %q, granted under %q; want switch-cp-2-a1", a, r.Status.Operation)
	}
}

// switchSlotTakenBackAtItsDeadline (injected clock): a host
// that never reports its member healthy keeps the slot for its hold, not a
// moment longer; the next host then gets it.
func switchSlotTakenBackAtItsDeadline(t *testing.T, e *switchEnv) {
	g := e.guard()
	e.ask("cp-2", "a1", time.Minute)
	e.ask("cp-3", "a1", time.Minute)
	e.pass(g)
	e.want("cp-2", api.SwitchGranted, "")
	e.want("cp-3", api.SwitchWaiting, "the switch of cp-2")
	e.clk.Advance(time.Minute - time.Second)
	e.pass(g)
	if a := e.active(); a != "switch-cp-2-a1" {
		t.Fatalf("slot held by %q before the deadline, want switch-cp-2-a1", a)
	}
	e.clk.Advance(time.Second)
	e.pass(g)
	e.want("cp-2", api.SwitchExpired, "did not report its member healthy")
	e.want("cp-3", api.SwitchGranted, "")
	op := &api.Operation{}
	if err := e.st.Get(t.Context(), store.OpKey("switch-cp-2-a1"), op); err != nil || op.Status.Phase != api.OpFailed {
		t.Fatalf("journal of the expired switch: %+v, %v; want Failed", op.Status, err)
	}
}

// switchOfTheLeaderMovesLeadershipFirst: the host whose
// member leads is granted only once leadership moved to another member.
func switchOfTheLeaderMovesLeadershipFirst(t *testing.T, e *switchEnv) {
	g := e.guard()
	leader := e.leaderNode()
	e.ask(leader, "a1", 0)
	e.pass(g)
	e.want(leader, api.SwitchGranted, "leadership moved off "+leader)
	if now := e.leaderNode(); now == leader {
		t.Fatalf("%s granted while its member leads", leader)
	}
	e.switched(leader)
	e.pass(g)
	e.want(leader, api.SwitchReleased, "member is healthy")
	if a := e.active(); a != "" {
		t.Fatalf("slot still held by %q", a)
	}
}

// leaderNode is the node whose member leads etcd.
func (e *switchEnv) leaderNode() string {
	e.t.Helper()
	ad := etcdadmin.New(e.st.Client(), etcdtest.CallBudget)
	defer ad.Close()
	ms, err := ad.Observe(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range ms {
		if m.Leader {
			for i, cm := range e.cl.Members {
				if len(m.PeerURLs) > 0 && m.PeerURLs[0] == cm.PeerURL {
					return fmt.Sprintf("cp-%d", i+1)
				}
			}
		}
	}
	e.t.Fatal("no leader")
	return ""
}

// host plays one control-plane host's pre-switch check and agent: it asks,
// waits for its grant, "switches" and reports its member healthy.
type switchLog struct {
	mu       sync.Mutex
	in       map[string]bool
	maxAtOne int
	order    []string
	slot     []string // what held the slot at each grant
}

func (l *switchLog) enter(node, slot string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.in[node] = true
	l.maxAtOne = max(l.maxAtOne, len(l.in))
	l.order = append(l.order, node)
	l.slot = append(l.slot, slot)
}

func (l *switchLog) leave(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.in, node)
}

// TestThreeHostsSwitchingAtOnceGoOneAtATime (real etcd, two coordinator
// candidates): three control-plane hosts ask at once; each is granted
// while no other holds a grant, under its own Switch operation holding the
// slot; the leader dies while a slot is held and the next leader releases
// it once its host reports healthy; every host switches.
func TestThreeHostsSwitchingAtOnceGoOneAtATime(t *testing.T) {
	t.Parallel()
	e := newSwitchEnv(t)
	a := startCandidate(t, e.cl, "coord-a", 2*time.Second)
	testwait.For(t, 10*time.Second, "a leader", func() (bool, string) { return leaderOf(t, e.st) == "coord-a", leaderOf(t, e.st) })
	b := startCandidate(t, e.cl, "coord-b", 2*time.Second)
	defer b.stop(t)
	log := &switchLog{in: map[string]bool{}}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	killed := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		node := fmt.Sprintf("cp-%d", i)
		r := api.NewSwitchRequest(node)
		r.Spec = api.SwitchRequestSpec{Attempt: "a1", Toplevel: "/nix/store/new-" + node, Action: "switch", RequestedAt: time.Now()}
		if err := e.st.Put(ctx, store.SwitchKey(node), r); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			errs <- playHost(ctx, e.st, node, log, func() {
				// The first grant: the leader dies while it is held.
				select {
				case <-killed:
				default:
					close(killed)
					a.stop(t)
				}
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if log.maxAtOne != 1 || len(log.order) != 3 {
		t.Fatalf("grants %v, at most %d at once; want 3, one at a time", log.order, log.maxAtOne)
	}
	for i, s := range log.slot {
		if s != "switch-"+log.order[i]+"-a1" {
			t.Fatalf("%s granted while the slot was held by %q", log.order[i], s)
		}
	}
	if got := leaderOf(t, e.st); got != "coord-b" {
		t.Fatalf("leader %q, want coord-b after coord-a stopped", got)
	}
}

// playHost waits for node's grant, records it, runs during (once), marks
// the switch done and waits for the release.
func playHost(ctx context.Context, st *store.Store, node string, log *switchLog, during func()) error {
	granted := false
	for {
		r := &api.SwitchRequest{}
		if err := st.Get(ctx, store.SwitchKey(node), r); err != nil {
			return err
		}
		switch {
		case r.Answered() && r.Status.Phase == api.SwitchGranted && !granted:
			granted = true
			op, err := st.ActiveOp(ctx)
			if err != nil {
				return err
			}
			slot := ""
			if op != nil {
				slot = op.Metadata.Name
			}
			log.enter(node, slot)
			during()
			r.Spec.SwitchedAt = time.Now()
			log.leave(node) // before the write: the next grant may follow at once
			if err := st.Update(ctx, store.SwitchKey(node), r); err != nil {
				return err
			}
		case r.Answered() && r.Status.Phase == api.SwitchReleased:
			return nil
		case r.Answered() && (r.Status.Phase == api.SwitchRefused || r.Status.Phase == api.SwitchExpired):
			return fmt.Errorf("%s: %s: %s", node, r.Status.Phase, r.Status.Message)
		}
		wctx, stop := context.WithCancel(ctx)
		w := st.Watch(wctx, store.SwitchKey(node), r.Metadata.Revision+1)
		select {
		case <-w:
			stop()
		case <-ctx.Done():
			stop()
			return fmt.Errorf("%s: %w waiting; last status %+v", node, ctx.Err(), r.Status)
		}
	}
}

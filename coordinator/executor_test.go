package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/coordinatortest"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
)

// The executor's controller tier: the planner and the executor, pass by
// pass, with the journal in real etcd and the membership in the fakes
// (memAdmin behind faultAdmin), on an injected clock.

// execHarness is one store, one fake membership of three voters cp-0..2
// (cp-0 leads), and the leader of the moment.
type execHarness struct {
	t      *testing.T
	st     *store.Store
	mem    *memAdmin
	faults *faultAdmin
	c      *Coordinator
	fence  store.Fence
	now    time.Time
	// crashAt, when set, makes the leader crash (panic) right after a
	// side effect of that action succeeded, before the journal records
	// it; the next pass is a new leader's.
	crashAt membership.Action
	crashed bool
	// wantVoters is spec.voters the passes plan with: 7 unless a test
	// sets it, so that every joining host is wanted as a voter.
	wantVoters int
	// snapStore, when set, is every leader's snapshot destination
	// (Config.SnapshotStores); nil: snapshot.Open.
	snapStore func(dest string) (snapshot.Store, error)
}

// openSnapshots is the leaders' Config.SnapshotStores.
func (h *execHarness) openSnapshots(dest string) (snapshot.Store, error) {
	if h.snapStore != nil {
		return h.snapStore(dest)
	}
	return snapshot.Open(dest, nil)
}

// errCrash is what a crashed pass returns.
var errCrash = errors.New("leader crashed")

// execPrefixes numbers the harnesses' keyspaces.
var execPrefixes atomic.Int64

// newExecHarness returns a harness with its own keyspace on cl.
func newExecHarness(t *testing.T, cl *etcdtest.Cluster) *execHarness {
	prefix := fmt.Sprintf("/exec-%d/", execPrefixes.Add(1))
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), prefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &execHarness{t: t, st: st, mem: newMemAdmin("cp-0", "cp-1", "cp-2"), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), wantVoters: 7}
	h.faults = &faultAdmin{next: h.mem}
	for _, n := range []string{"cp-0", "cp-1", "cp-2"} {
		h.register(n)
	}
	h.lead("leader-1")
	return h
}

// register writes a live control-plane node with fake member URLs.
func (h *execHarness) register(name string) {
	h.t.Helper()
	n := api.NewNode(name)
	n.Spec = api.NodeSpec{Roles: []api.Role{api.RoleControlPlane}, PeerURL: memPeerURL(name), ClientURL: memClientURL(name)}
	h.put(store.NodeKey(name), n)
	if _, err := h.st.Client().Put(h.t.Context(), store.HeartbeatKey(name), ""); err != nil {
		h.t.Fatal(err)
	}
}

func (h *execHarness) put(key string, o api.Object) {
	h.t.Helper()
	if err := h.st.Put(h.t.Context(), key, o); err != nil {
		h.t.Fatal(err)
	}
}

// lead starts a new leadership term, as a new coordinator: a new fence,
// the last term's key gone.
func (h *execHarness) lead(name string) {
	h.t.Helper()
	ctx := h.t.Context()
	if h.fence.Key != "" {
		if _, err := h.st.Client().Delete(ctx, h.fence.Key); err != nil {
			h.t.Fatal(err)
		}
	}
	key := store.ElectionPrefix + name
	resp, err := h.st.Client().Put(ctx, key, name)
	if err != nil {
		h.t.Fatal(err)
	}
	h.fence = store.Fence{Key: key, Rev: resp.Header.Revision}
	// The leader crashes (panics) where the observer hears of a change
	// etcd accepted and the journal does not record yet.
	crash := &coordinatortest.Observer{OnMembershipChanged: func(s membership.Step) {
		if h.crashAt != "" && s.Action == h.crashAt && !h.crashed {
			h.crashed = true
			panic(errCrash)
		}
	}}
	h.c = New(Config{Name: name, Policy: membership.Policy{LearnerStartTimeout: time.Hour, LearnerProgressTimeout: time.Hour},
		Clock: clockAt(&h.now), Observer: crash, SnapshotStores: h.openSnapshots, SnapshotTempDir: h.t.TempDir()}, h.st, slog.New(slog.DiscardHandler))
}

// pass is one reconcile pass of the current leader: observe, plan, apply.
func (h *execHarness) pass() (step membership.Step, err error) {
	defer func() {
		if r := recover(); r != nil {
			if r != errCrash {
				panic(r)
			}
			err = errCrash
		}
	}()
	obs, step, err := h.plan()
	if err != nil {
		return step, err
	}
	return step, h.applyIn(h.fence, obs, step)
}

// plan observes and plans as the leader does.
func (h *execHarness) plan() (*observation, membership.Step, error) {
	obs, err := observe(h.t.Context(), h.st, h.faults.Observe)
	if err != nil {
		return nil, membership.Step{}, err
	}
	if obs.cluster != nil {
		obs.Cluster = obs.cluster.Spec
	}
	if h.wantVoters != 0 {
		obs.Cluster.Voters = h.wantVoters
	}
	return obs, membership.Plan(obs.Observed, h.c.cfg.Policy, h.now), nil
}

// applyIn applies step, planned from obs, in the leader's term of fence.
func (h *execHarness) applyIn(fence store.Fence, obs *observation, step membership.Step) error {
	ctx := h.t.Context()
	d := testMembershipDeps(h.c, fence)
	if err := d.syncExternalStarts(ctx, obs); err != nil {
		return err
	}
	return (&executor{d: d, admin: h.faults, obs: obs, now: h.now}).apply(ctx, step)
}

// agent does what the joining node's agent does: start its learner once
// its join request says the learner was added.
func (h *execHarness) agent(name string) {
	h.t.Helper()
	j := api.NewJoinRequest(name)
	if err := h.st.Get(h.t.Context(), store.JoinKey(name), j); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		h.t.Fatal(err)
	}
	if j.Status.Phase != api.JoinLearnerAdded {
		return
	}
	ms, _ := h.mem.Observe(h.t.Context())
	if m := memberByID(ms, j.Status.MemberID); m != nil && !m.Started() {
		if err := h.mem.start(j.Status.MemberID, name, memClientURL(name)); err != nil {
			h.t.Fatal(err)
		}
	}
}

// converge runs passes, a second of the clock apart, until a pass plans
// nothing; a crashed leader is followed by a new one. It returns the
// errors the passes returned.
func (h *execHarness) converge(joining string) []error {
	h.t.Helper()
	var errs []error
	for i := range 40 {
		step, err := h.pass()
		h.now = h.now.Add(time.Second)
		if errors.Is(err, errCrash) {
			old := h.fence
			h.lead(fmt.Sprintf("leader-%d", i+2))
			// The crashed leader's term is over: it can write nothing.
			if err := (&executor{d: testMembershipDeps(h.c, old)}).commit(h.t.Context(), nil, api.NewOperation("stale")); !isNotLeader(err) {
				h.t.Fatalf("a write fenced on the crashed leader's term: %v, want ErrNotLeader", err)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if joining != "" {
			h.agent(joining)
		}
		if step.Action == membership.None {
			return errs
		}
	}
	h.t.Fatalf("no convergence after 40 passes; errors: %v", errs)
	return nil
}

// voters returns the fake's voters' names, sorted.
func (h *execHarness) voters() []string {
	ms, _ := h.mem.Observe(h.t.Context())
	var out []string
	for _, m := range ms {
		if !m.Learner {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// checkOpDone checks that no operation is active and that op succeeded.
func (h *execHarness) checkOpDone(name string) {
	h.t.Helper()
	resp, err := h.st.Client().Get(h.t.Context(), store.ActiveOpKey)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		h.t.Fatalf("operation %s still active", resp.Kvs[0].Value)
	}
	op := &api.Operation{}
	if err := h.st.Get(h.t.Context(), store.OpKey(name), op); err != nil {
		h.t.Fatal(err)
	}
	if op.Status.Phase != api.OpSucceeded {
		h.t.Fatalf("operation %s: phase %q, want Succeeded; history %+v", name, op.Status.Phase, op.Status.History)
	}
}

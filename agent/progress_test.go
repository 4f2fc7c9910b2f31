package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/sdnotify/notifytest"
	"github.com/homystack/nico/pkg/store"
)

// countingExtender counts the asks.
type countingExtender struct{ asks []time.Duration }

func (c *countingExtender) ExtendTimeout(d time.Duration) error {
	c.asks = append(c.asks, d)
	return nil
}

// TestProgressWatchAsksWhileTheJoinMovesOn: more start time is asked for
// at every pass while the join's mark changed within stallAfter, not
// once it has not, and again once it changes.
func TestProgressWatchAsksWhileTheJoinMovesOn(t *testing.T) {
	const stall = 5 * time.Minute
	start := time.Unix(1000, 0)
	asks := &countingExtender{}
	var now time.Time
	var mark joinMark
	var sampleErr error
	p := &progressWatch{extend: asks, extendBy: 45 * time.Second, stallAfter: stall, log: logging.Test(t),
		now: func() time.Time { return now }, lastAt: start,
		sample: func(context.Context) (joinMark, error) { return mark, sampleErr }}
	step := func(what string, at time.Duration, m joinMark, err error, wantAsk bool) {
		t.Helper()
		now, mark, sampleErr = start.Add(at), m, err
		before := len(asks.asks)
		if err := p.pass(t.Context()); err != nil {
			t.Fatalf("%s: pass: %v", what, err)
		}
		switch asked := len(asks.asks) > before; {
		case asked && !wantAsk:
			t.Fatalf("%s: more start time asked for", what)
		case !asked && wantAsk:
			t.Fatalf("%s: no more start time asked for", what)
		case asked && asks.asks[before] != 45*time.Second:
			t.Fatalf("%s: asked for %v, want 45s", what, asks.asks[before])
		}
	}
	a := joinMark{joins: 5}
	step("first sample", 0, a, nil, true)
	step("no change, within stallAfter", stall-time.Second, a, nil, true)
	step("no change for stallAfter", stall+time.Second, a, nil, false)
	step("a failed sample is no progress", stall+2*time.Second, a, errors.New("etcd unreachable"), false)
	step("the learner applied an entry", stall+3*time.Second, joinMark{joins: 5, applied: 1}, nil, true)
	step("within stallAfter of the last change", 2*stall, joinMark{joins: 5, applied: 1}, nil, true)
}

// TestJoinSamplerReadsJoinsOpsAndTheMember: a join's mark moves with the
// join requests, the operation journal and the local member's applied
// index; a member that does not run yet reads as index 0, not an error.
func TestJoinSamplerReadsJoinsOpsAndTheMember(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sample := joinSampler(st, st.Client(), cl.Members[0].ClientURL)
	m0, err := sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m0.applied == 0 {
		t.Errorf("the running member's applied index reads 0")
	}
	if err := st.Put(ctx, store.JoinKey("cp-2"), api.NewJoinRequest("cp-2")); err != nil {
		t.Fatal(err)
	}
	m1, err := sample(ctx)
	if err != nil || m1.joins <= m0.joins || m1.ops != m0.ops {
		t.Fatalf("after a join request: %+v, %v; before %+v", m1, err, m0)
	}
	if _, err := st.Client().Put(ctx, store.OpKey("op-1"), "{}"); err != nil {
		t.Fatal(err)
	}
	m2, err := sample(ctx)
	if err != nil || m2.ops <= m1.ops || m2.joins != m1.joins {
		t.Fatalf("after an operation: %+v, %v; before %+v", m2, err, m1)
	}
	_, client := etcdtest.URLs(t)
	if m, err := joinSampler(st, st.Client(), client)(ctx); err != nil || m.applied != 0 || m.joins != m2.joins {
		t.Fatalf("with no local member: %+v, %v", m, err)
	}
}

// TestJoinAsksForStartTime: under a notify socket, the first thing a join
// tells systemd is that it needs more start time (EXTEND_TIMEOUT_USEC);
// without one it sends nothing.
func TestJoinAsksForStartTime(t *testing.T) {
	sock := notifytest.Listen(t)

	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	peer, client := etcdtest.URLs(t)
	a := New(Config{Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}, nil, sdnotify.New(), logging.Test(t))
	a.use(st.Client(), st)
	ctx, cancel := context.WithCancel(t.Context())
	joined := make(chan error, 1)
	go func() { joined <- a.etcdJoin.run(ctx, nil) }()
	if got, want := sock.Next(t), "EXTEND_TIMEOUT_USEC=45000000"; got != want {
		t.Errorf("first datagram of a join %q, want %q", got, want)
	}
	cancel()
	if err := <-joined; !errors.Is(err, context.Canceled) {
		t.Errorf("join = %v, want context.Canceled", err)
	}
}

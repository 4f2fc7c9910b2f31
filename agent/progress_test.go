package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/store"
)

// chanExtender hands every ask to the test, which must take it.
type chanExtender chan time.Duration

func (c chanExtender) ExtendTimeout(d time.Duration) error { c <- d; return nil }

// TestProgressWatchAsksWhileTheJoinMovesOn: more start time is asked for
// at every sample while the join's mark changed within stallAfter, not
// once it has not, and again once it changes.
func TestProgressWatchAsksWhileTheJoinMovesOn(t *testing.T) {
	const stall = 5 * time.Minute
	type state struct {
		at   time.Duration // since the start
		mark joinMark
		err  error
	}
	asks := make(chanExtender)
	tick := make(chan time.Time)
	states := make(chan state) // each sample takes the test's next state
	var now time.Time          // the loop's own: set by its sample, read by its clock
	p := &progressWatch{extend: asks, tick: tick, extendBy: 45 * time.Second, stallAfter: stall, log: logging.Test(t),
		now: func() time.Time { return now },
		sample: func(context.Context) (joinMark, error) {
			s := <-states
			now = time.Unix(1000, 0).Add(s.at)
			return s.mark, s.err
		}}
	now = time.Unix(1000, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()

	asked := func(step string) {
		t.Helper()
		select {
		case d := <-asks:
			if d != 45*time.Second {
				t.Fatalf("%s: asked for %v, want 45s", step, d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no more start time asked for", step)
		}
	}
	// notAsked sends the next tick: had the last sample asked, the loop
	// would wait on the ask instead of taking the tick.
	notAsked := func(step string) {
		t.Helper()
		select {
		case <-asks:
			t.Fatalf("%s: more start time asked for", step)
		case tick <- time.Time{}:
		}
	}
	a := joinMark{joins: 5}
	tick <- time.Time{}
	states <- state{0, a, nil}
	asked("first sample")
	tick <- time.Time{}
	states <- state{stall - time.Second, a, nil}
	asked("no change, within stallAfter")
	tick <- time.Time{}
	states <- state{stall + time.Second, a, nil}
	notAsked("no change for stallAfter")
	states <- state{stall + 2*time.Second, a, errors.New("etcd unreachable")}
	notAsked("a failed sample is no progress")
	states <- state{stall + 3*time.Second, joinMark{joins: 5, applied: 1}, nil}
	asked("the learner applied an entry")
	tick <- time.Time{}
	states <- state{2 * stall, joinMark{joins: 5, applied: 1}, nil}
	asked("within stallAfter of the last change")
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
	sample := joinSampler(st.Client(), cl.Members[0].ClientURL)
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
	if m, err := joinSampler(st.Client(), client)(ctx); err != nil || m.applied != 0 || m.joins != m2.joins {
		t.Fatalf("with no local member: %+v, %v", m, err)
	}
}

// TestJoinAsksForStartTime: under a notify socket, the first thing a join
// tells systemd is that it needs more start time (EXTEND_TIMEOUT_USEC);
// without one it sends nothing.
func TestJoinAsksForStartTime(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)

	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	peer, client := etcdtest.URLs(t)
	a := New(Config{Name: "cp-2", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}, nil, sdnotify.New(), logging.Test(t))
	a.cli, a.st = st.Client(), st
	ctx, cancel := context.WithCancel(t.Context())
	joined := make(chan error, 1)
	go func() { joined <- a.join(ctx) }()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("reading the notify socket: %v", err)
	}
	if got, want := string(buf[:n]), "EXTEND_TIMEOUT_USEC=45000000"; got != want {
		t.Errorf("first datagram of a join %q, want %q", got, want)
	}
	cancel()
	if err := <-joined; !errors.Is(err, context.Canceled) {
		t.Errorf("join = %v, want context.Canceled", err)
	}
}

package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// seedEvents writes a small history: cp-2 registered and joined (its
// journal), a refused removal of cp-1, liveness of both, and an operation
// on w-9 two hours old.
func seedEvents(t *testing.T, st *store.Store) {
	ctx := t.Context()
	base := time.Now().Add(-10 * time.Minute)
	n := api.NewNode("cp-2")
	n.Metadata.CreatedAt = base
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	op := api.NewOperation("20260101T000000.000000-join-cp-2")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-2", PeerURL: "https://127.0.0.2:2380"}
	op.Status.Phase, op.Status.Step = api.OpRunning, api.StepAddLearner
	op.Record(base.Add(time.Second), "coord-1", "started")
	op.Status.Step = api.StepLearner
	op.Record(base.Add(2*time.Second), "coord-1", "learner 00000000000000ab added")
	op.Record(base.Add(3*time.Second), "coord-1", "learner 00000000000000ab promoted")
	op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
	op.Record(base.Add(4*time.Second), "coord-1", "member 00000000000000ab is a voter")
	rm := api.NewRemoveRequest("cp-1")
	rm.Metadata.CreatedAt = base.Add(5 * time.Second)
	rm.Status = api.RemoveRequestStatus{Phase: api.RemoveRefused, Message: "it would leave 1 of 2 voters", UpdatedAt: base.Add(6 * time.Second)}
	l := api.NewLiveness()
	l.Status.Nodes = map[string]api.NodeLiveness{
		"cp-1": {State: "alive", Since: base.Add(-time.Minute)},
		"cp-2": {State: "dead", Since: base.Add(7 * time.Second), Reason: "no heartbeat"},
	}
	old := api.NewOperation("20251231T000000.000000-join-w-9")
	old.Spec = api.OperationSpec{Type: api.OpJoin, Node: "w-9"}
	old.Status.Phase = api.OpFailed
	old.Record(time.Now().Add(-2*time.Hour), "coord-1", "started")
	old.Record(time.Now().Add(-2*time.Hour+time.Second), "coord-1", "learner never started")
	for _, o := range []api.Object{n, op, rm, l, old} {
		if err := st.PutObject(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// eventLines parses JSON lines.
func eventLines(t *testing.T, out string) []events.Event {
	t.Helper()
	var evs []events.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func reasonsOf(evs []events.Event) string {
	var rs []string
	for _, e := range evs {
		rs = append(rs, e.Reason)
	}
	return strings.Join(rs, " ")
}

func TestEvents(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	seedEvents(t, st)
	eps := c.Endpoints()
	opName := "20260101T000000.000000-join-cp-2"

	t.Run("backlog table, oldest first", func(t *testing.T) {
		r := run(t, eps, "events")
		r.want(t, 0, []string{"TIME", "TYPE", "OBJECT", "REASON", "MESSAGE", "RemoveRequest/cp-1", "removal of cp-1 refused: it would leave 1 of 2 voters"}, nil)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
			got = append(got, strings.Fields(l)[3])
		}
		want := "JoinStarted JoinFailed NodeAlive Registered JoinStarted LearnerAdded Promoted Joined RemovalRequested Refused NodeDead"
		if strings.Join(got, " ") != want {
			t.Fatalf("reasons %s\nwant    %s", strings.Join(got, " "), want)
		}
	})
	t.Run("json lines", func(t *testing.T) {
		r := run(t, eps, "events", "-o", "json")
		r.want(t, 0, nil, nil)
		evs := eventLines(t, r.stdout)
		if len(evs) != 11 {
			t.Fatalf("%d events, want 11", len(evs))
		}
		for i, e := range evs {
			if i > 0 && e.Time.Before(evs[i-1].Time) {
				t.Errorf("event %d older than the one before", i)
			}
		}
		j := evs[5]
		if j.Kind != api.KindOperation || j.Name != opName || j.Op != opName || j.Reason != events.LearnerAdded || j.Type != events.Normal ||
			len(j.Nodes) != 1 || j.Nodes[0] != "cp-2" || j.Revision == 0 {
			t.Fatalf("LearnerAdded event = %+v", j)
		}
		for _, f := range []string{`"time":`, `"kind":`, `"name":`, `"type":`, `"reason":`, `"message":`, `"nodes":`, `"op":`, `"revision":`} {
			if !strings.Contains(strings.Split(r.stdout, "\n")[0], f) {
				t.Errorf("first line lacks %s", f)
			}
		}
	})
	t.Run("for a node", func(t *testing.T) {
		evs := eventLines(t, run(t, eps, "events", "--for", "node/cp-2", "-o", "json").stdout)
		if got := reasonsOf(evs); got != "Registered JoinStarted LearnerAdded Promoted Joined NodeDead" {
			t.Fatalf("cp-2's events: %s", got)
		}
		evs = eventLines(t, run(t, eps, "events", "--for", "node/cp-1", "-o", "json").stdout)
		if got := reasonsOf(evs); got != "NodeAlive RemovalRequested Refused" {
			t.Fatalf("cp-1's events: %s", got)
		}
	})
	t.Run("for an operation", func(t *testing.T) {
		evs := eventLines(t, run(t, eps, "events", "--for", "op/"+opName, "-o", "json").stdout)
		if got := reasonsOf(evs); got != "JoinStarted LearnerAdded Promoted Joined" {
			t.Fatalf("op's events: %s", got)
		}
	})
	t.Run("since", func(t *testing.T) {
		evs := eventLines(t, run(t, eps, "events", "--since", "1h", "-o", "json").stdout)
		if len(evs) != 9 || evs[0].Reason != events.NodeAlive {
			t.Fatalf("since 1h: %s", reasonsOf(evs))
		}
		at := time.Now().Add(-90 * time.Minute).UTC().Format(time.RFC3339)
		if evs := eventLines(t, run(t, eps, "events", "--since", at, "-o", "json").stdout); len(evs) != 9 {
			t.Fatalf("since %s: %s", at, reasonsOf(evs))
		}
	})
	t.Run("nothing known", func(t *testing.T) {
		run(t, eps, "events", "--for", "node/nope").want(t, ExitNotFound, nil, []string{"no node named nope", "nicoctl get nodes"})
		run(t, eps, "events", "--for", "op/nope").want(t, ExitNotFound, nil, []string{"no operation named nope", "nicoctl get ops"})
		run(t, eps, "events", "--for", "cluster/nope").want(t, ExitNotFound, nil, []string{"no KubernetesCluster named nope", "nicoctl get clusters"})
	})
}

func TestEventsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--for", "pod/x"}, `kind "pod" is not accepted; use node/NAME, op/NAME or cluster/NAME`},
		{[]string{"--for", "node"}, `--for "node": want KIND/NAME`},
		{[]string{"--for", "node/"}, "want KIND/NAME"},
		{[]string{"--since", "yesterday"}, `--since "yesterday": want a positive duration such as 90m or an RFC 3339 time`},
		{[]string{"--since", "-5m"}, "want a positive duration"},
		{[]string{"-o", "yaml"}, `output "yaml" is not accepted by events; use table or json`},
		{[]string{"extra"}, "unknown command"},
	} {
		run(t, []string{"https://127.0.0.1:1"}, append([]string{"events"}, tc.args...)...).want(t, ExitUsage, nil, []string{tc.msg})
	}
	run(t, []string{"https://127.0.0.1:1"}, "events", "--timeout", "300ms").want(t, ExitUsage, nil, []string{"cannot reach etcd"})
}

// watcher runs nicoctl events -w until stopped.
type watcher struct {
	out    *lines
	stderr bytes.Buffer
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // closed when it ended, with code set
	code   int
}

func watchEvents(t *testing.T, eps []string, args ...string) *watcher {
	t.Helper()
	root := etcdtest.IssueFiles(t, t.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	args = append([]string{"--endpoints", strings.Join(eps, ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key, "events", "-w"}, args...)
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{out: &lines{ch: make(chan string, 1000)}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.code = mainContext(ctx, args, w.out, &lockedWriter{mu: &w.mu, w: &w.stderr})
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop interrupts the watch; it must end with 0.
func (w *watcher) stop(t *testing.T) {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	<-w.done
	if code := w.code; code != 0 {
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Errorf("events -w ended with %d: %s", code, w.stderr.String())
	}
}

// next returns the next event printed.
func (w *watcher) next(t *testing.T) events.Event {
	t.Helper()
	select {
	case l := <-w.out.ch:
		t.Logf("event: %s", l)
		return eventLines(t, l)[0]
	case <-w.done:
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("events -w ended with %d: %s", w.code, w.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	return events.Event{}
}

// waitStderr waits until standard error has s.
func (w *watcher) waitStderr(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		got := w.stderr.String()
		w.mu.Unlock()
		if strings.Contains(got, s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q: no %q within 30s", got, s)
		}
		select {
		case <-w.done:
			t.Fatalf("events -w ended with %d before writing %q: %s", w.code, s, got)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestEventsWatchAJoin: -w prints the backlog, then a join's steps live as
// the coordinator writes them (the objects of each step in one
// transaction, as its executor does), and ends with 0 when interrupted.
func TestEventsWatchAJoin(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	seedEvents(t, st)
	w := watchEvents(t, c.Endpoints(), "-o", "json", "--for", "node/cp-3")
	// Nothing is known of cp-3 yet: once this note is out, the backlog has
	// been read, and all that follows comes through the watch.
	w.waitStderr(t, "no node named cp-3 yet; waiting for its events")
	put := func(objs ...api.Object) {
		t.Helper()
		var ops []clientv3.Op
		for _, o := range objs {
			p, err := store.PutObjectOp(o)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, p)
		}
		if _, err := st.Txn(t.Context(), nil, ops...); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	j := api.NewJoinRequest("cp-3")
	j.Metadata.CreatedAt = now
	j.Spec = api.JoinRequestSpec{Node: "cp-3", PeerURL: "https://127.0.0.3:2380", Attempt: 1}
	put(j)
	if e := w.next(t); e.Reason != events.JoinRequested || e.Kind != api.KindJoinRequest {
		t.Fatalf("event %+v, want JoinRequested", e)
	}
	op := api.NewOperation("20260101T000001.000000-join-cp-3")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-3", PeerURL: j.Spec.PeerURL, Request: "cp-3"}
	op.Status.Phase, op.Status.Step = api.OpRunning, api.StepAddLearner
	op.Record(now, "coord-1", "started")
	put(op)
	op.Spec.MemberID, op.Status.Step = 0xcd, api.StepLearner
	op.Record(now.Add(time.Millisecond), "coord-1", "learner 00000000000000cd added")
	j.Status = api.JoinRequestStatus{Phase: api.JoinLearnerAdded, MemberID: 0xcd, Operation: op.Metadata.Name, UpdatedAt: now}
	put(op, j)
	op.Record(now.Add(2*time.Millisecond), "coord-1", "learner 00000000000000cd promoted")
	put(op)
	op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
	op.Record(now.Add(3*time.Millisecond), "coord-1", "member 00000000000000cd is a voter")
	j.Status.Phase, j.Status.Message = api.JoinJoined, "member is a voter"
	put(op, j)
	var got []string
	for range 4 {
		e := w.next(t)
		if e.Op != op.Metadata.Name {
			t.Errorf("event %+v: want op %s", e, op.Metadata.Name)
		}
		got = append(got, e.Reason)
	}
	if strings.Join(got, " ") != "JoinStarted LearnerAdded Promoted Joined" {
		t.Fatalf("live events: %s", strings.Join(got, " "))
	}
}

// TestEventsWatchNoGapNoDuplicate: operations are journaled without pause
// while events -w starts, so that its backlog is read somewhere in the
// middle of them: every line of every operation is printed exactly once,
// in order, whichever side of the backlog/watch boundary it fell on.
func TestEventsWatchNoGapNoDuplicate(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	ctx, stopWriting := context.WithCancel(t.Context())
	written := make(chan int, 1)
	started := make(chan struct{})
	go func() {
		n := 0
		defer func() { written <- n }()
		for ; ; n++ {
			op := api.NewOperation(fmt.Sprintf("op-%04d", n))
			op.Spec = api.OperationSpec{Type: api.OpJoin, Node: fmt.Sprintf("n%d", n)}
			op.Status.Phase, op.Status.Step = api.OpRunning, api.StepAddLearner
			op.Record(time.Now(), "coord-1", "started")
			if st.PutObject(ctx, op) != nil {
				return
			}
			op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
			op.Record(time.Now(), "coord-1", "member is a voter")
			if st.PutObject(ctx, op) != nil {
				return
			}
			if n == 2 {
				close(started)
			}
		}
	}()
	<-started
	w := watchEvents(t, c.Endpoints(), "-o", "json")
	var evs []events.Event
	evs = append(evs, w.next(t)) // the backlog has been read
	for range 20 {
		evs = append(evs, w.next(t))
	}
	stopWriting()
	n := <-written
	// Every line of every operation, the last one perhaps half written.
	want := map[string]bool{}
	for i := 0; i <= n; i++ {
		op := &api.Operation{}
		if err := st.Get(t.Context(), store.OpKey(fmt.Sprintf("op-%04d", i)), op); err != nil {
			if i == n {
				break
			}
			t.Fatal(err)
		}
		want[op.Metadata.Name+" "+events.JoinStarted] = true
		if len(op.Status.History) == 2 {
			want[op.Metadata.Name+" "+events.Joined] = true
		}
	}
	seen := map[string]int{}
	for _, e := range evs {
		seen[e.Op+" "+e.Reason]++
	}
	for len(seen) < len(want) {
		e := w.next(t)
		evs = append(evs, e)
		seen[e.Op+" "+e.Reason]++
	}
	w.stop(t)
	for len(w.out.ch) > 0 {
		e := eventLines(t, <-w.out.ch)[0]
		evs = append(evs, e)
		seen[e.Op+" "+e.Reason]++
	}
	for k, c := range seen {
		if c != 1 || !want[k] {
			t.Errorf("%s printed %d times, want once (is it an event written? %v)", k, c, want[k])
		}
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events printed, want %d (%d operations written)", len(evs), len(want), n)
	}
}

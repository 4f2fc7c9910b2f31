package events

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"github.com/homystack/nico/pkg/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...) }

func newStore(t *testing.T) *store.Store {
	t.Helper()
	c := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// record appends a history line to op and writes it.
func record(t *testing.T, st *store.Store, op *api.Operation, step api.OpStep, msg string) {
	t.Helper()
	op.Status.Step = step
	op.Record(time.Now(), "coord-1", msg)
	if err := st.PutObject(t.Context(), op); err != nil {
		t.Fatal(err)
	}
}

// follower runs Follow and hands over what it finds.
type follower struct {
	events  chan Event
	notices chan string
	done    chan struct{} // closed when Follow returned err
	err     error
	cancel  context.CancelFunc
}

func follow(t *testing.T, f *Feed) *follower {
	ctx, cancel := context.WithCancel(t.Context())
	fl := &follower{events: make(chan Event, 100), notices: make(chan string, 10), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(fl.done)
		fl.err = f.Follow(ctx, Handler{
			Event:  func(e Event) error { fl.events <- e; return nil },
			Bad:    func(err error) { t.Errorf("bad object: %v", err) },
			Notice: func(s string) { fl.notices <- s },
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-fl.done
		if fl.err != nil {
			t.Errorf("Follow: %v", fl.err)
		}
	})
	return fl
}

func (fl *follower) next(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-fl.events:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
		return Event{}
	}
}

func reasons(evs []Event) string {
	var rs []string
	for _, e := range evs {
		rs = append(rs, e.Reason)
	}
	return strings.Join(rs, " ")
}

// TestFeedBacklogThenWatch: the backlog is what the store holds, oldest
// first; a change written after the backlog was read and before the watch
// started is followed once, and later ones in order.
func TestFeedBacklogThenWatch(t *testing.T) {
	st := newStore(t)
	n := api.NewNode("cp-2")
	n.Metadata.CreatedAt = time.Now().Add(-time.Minute)
	if err := st.PutObject(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	op := api.NewOperation("op-join-cp-2")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-2"}
	op.Status.Phase = api.OpRunning
	record(t, st, op, api.StepAddLearner, "started")
	record(t, st, op, api.StepLearner, "learner 00000000000000ab added")

	f := NewFeed(st, time.Now)
	backlog, bad, err := f.Backlog(t.Context())
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	if got := reasons(backlog); got != "Registered JoinStarted LearnerAdded" {
		t.Fatalf("backlog = %s", got)
	}
	// Each carries the revision its object was last written at.
	if backlog[0].Revision >= backlog[1].Revision || backlog[1].Revision != backlog[2].Revision || backlog[2].Revision != f.Revision() {
		t.Errorf("backlog revisions %d %d %d, read at %d", backlog[0].Revision, backlog[1].Revision, backlog[2].Revision, f.Revision())
	}
	read := f.Revision()
	// Between the backlog and the watch: must be followed, once.
	record(t, st, op, api.StepLearner, "learner 00000000000000ab promoted")
	fl := follow(t, f)
	if e := fl.next(t); e.Reason != Promoted || e.Revision <= read {
		t.Fatalf("first followed event %+v, want Promoted after revision %d", e, read)
	}
	op.Status.Phase = api.OpSucceeded
	record(t, st, op, api.StepDone, "member 00000000000000ab is a voter")
	if e := fl.next(t); e.Reason != Joined {
		t.Fatalf("event %+v, want Joined", e)
	}
	select {
	case e := <-fl.events:
		t.Fatalf("extra event %+v", e)
	default:
	}
}

// TestFeedCompactedWatch: when the revision the watch starts from is
// compacted, the feed says so, reads again, hands over what changed since
// its last read once, and follows on.
func TestFeedCompactedWatch(t *testing.T) {
	st := newStore(t)
	op := api.NewOperation("op-join-cp-3")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "cp-3"}
	op.Status.Phase = api.OpRunning
	record(t, st, op, api.StepAddLearner, "started")
	f := NewFeed(st, time.Now)
	if backlog, _, err := f.Backlog(t.Context()); err != nil || reasons(backlog) != "JoinStarted" {
		t.Fatalf("backlog %v, %v", reasons(backlog), err)
	}
	record(t, st, op, api.StepLearner, "learner 00000000000000cd added")
	record(t, st, op, api.StepLearner, "learner at raft index 7")
	rev, err := st.Revision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	fl := follow(t, f)
	select {
	case s := <-fl.notices:
		if !strings.Contains(s, "compacted") || !strings.Contains(s, fmt.Sprint(rev)) {
			t.Errorf("notice %q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no notice of the compaction")
	}
	if got := reasons([]Event{fl.next(t), fl.next(t)}); got != "LearnerAdded LearnerProgress" {
		t.Fatalf("after the re-read: %s", got)
	}
	op.Status.Phase = api.OpSucceeded
	record(t, st, op, api.StepDone, "member 00000000000000cd is a voter")
	if e := fl.next(t); e.Reason != Joined {
		t.Fatalf("event %+v, want Joined", e)
	}
	select {
	case e := <-fl.events:
		t.Fatalf("extra event %+v", e)
	default:
	}
}

// TestFeedWatchWithoutLeader: a watched member that loses its leader does
// not end the feed: it says so and watches again until ctx ends.
func TestFeedWatchWithoutLeader(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st, err := store.New(etcdtest.NewClient(t, c.Members[0].ClientURL), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFeed(st, time.Now)
	if _, _, err := f.Backlog(t.Context()); err != nil {
		t.Fatal(err)
	}
	fl := follow(t, f)
	c.Members[1].Close()
	c.Members[2].Close()
	for range 2 { // and again, after the first retry
		select {
		case s := <-fl.notices:
			if !strings.Contains(s, "no leader; watching again from revision") {
				t.Fatalf("notice %q", s)
			}
		case <-fl.done:
			t.Fatalf("Follow ended without a leader: %v", fl.err)
		case <-time.After(30 * time.Second):
			t.Fatal("no notice within 30s of the member losing its leader")
		}
	}
}

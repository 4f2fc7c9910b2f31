package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runningMember is a member.Runtime whose member runs until exit.
type runningMember struct {
	member.Runtime
	done chan struct{}
	err  error
}

func (r *runningMember) Done() <-chan struct{} { return r.done }
func (r *runningMember) Err() error            { return r.err }

// exit ends the member with err.
func (r *runningMember) exit(err error) { r.err = err; close(r.done) }

// notices sends on its channel each time a record matching msg is logged.
type notices struct {
	slog.Handler
	msg string
	ch  chan struct{}
}

func (n notices) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, n.msg) {
		select {
		case n.ch <- struct{}{}:
		default:
		}
	}
	return n.Handler.Handle(ctx, r)
}

func (n notices) Enabled(context.Context, slog.Level) bool { return true }

// recordingMember is a localMember of a one-member cluster whose client
// URL is a hold in front of the member's: its status calls go unanswered
// until the hold is released.
func recordingMember(t *testing.T, rt member.Runtime, log *slog.Logger) (*localMember, *etcdtest.Hold) {
	t.Helper()
	cl := etcdtest.Start(t, 1)
	m := cl.Members[0]
	hold := etcdtest.NewHold(t, strings.TrimPrefix(strings.TrimPrefix(m.ClientURL, "https://"), "http://"))
	scheme := m.ClientURL[:strings.Index(m.ClientURL, "://")]
	cfg := &Config{Name: "cp-1", DataDir: t.TempDir(), ClientURL: scheme + "://" + hold.Addr(), DialTimeout: 200 * time.Millisecond}
	return &localMember{cfg: cfg, runtime: rt, run: &memberRun{}, log: log, now: time.Now,
		dial: func(eps []string) (*clientv3.Client, error) { return etcdtest.NewClient(t, eps...), nil }}, hold
}

// recordUnanswered starts lm.record of a member running as rt, and returns
// once its first status call went unanswered past its timeout (record
// logs that it asks again); the channel gets record's result.
func recordUnanswered(t *testing.T, rt member.Runtime) (*localMember, *etcdtest.Hold, <-chan error) {
	t.Helper()
	asked := notices{Handler: slog.DiscardHandler, msg: "asking again", ch: make(chan struct{}, 1)}
	lm, hold := recordingMember(t, rt, slog.New(asked))
	errs := make(chan error, 1)
	go func() { errs <- lm.record(t.Context()) }()
	select {
	case <-asked.ch:
	case err := <-errs:
		t.Fatalf("record returned %v before any call went unanswered", err)
	}
	return lm, hold, errs
}

// TestRecordWaitsForALateAnswer: the member serves, but its first status
// calls go unanswered past the dial timeout (a loaded machine); record
// asks again and writes the marker once the member answers.
func TestRecordWaitsForALateAnswer(t *testing.T) {
	lm, hold, errs := recordUnanswered(t, &runningMember{done: make(chan struct{})})
	hold.Release()
	if err := <-errs; err != nil {
		t.Fatalf("record: %v", err)
	}
	mk, ok, err := member.ReadMarker(lm.cfg.DataDir)
	if err != nil || !ok || mk.MemberID == 0 || mk.EtcdVersion == "" {
		t.Fatalf("marker %+v (found %v, %v), want the member's ID and version", mk, ok, err)
	}
}

// TestRecordEndsWhenTheMemberExits: a member that exits while record waits
// for its answer ends it at once with the member's error, so that a
// removed learner is told apart (member.ErrRemoved).
func TestRecordEndsWhenTheMemberExits(t *testing.T) {
	rt := &runningMember{done: make(chan struct{})}
	_, _, errs := recordUnanswered(t, rt)
	rt.exit(member.ErrRemoved)
	select {
	case err := <-errs:
		if !errors.Is(err, member.ErrRemoved) {
			t.Fatalf("record returned %v, want member.ErrRemoved", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("record went on asking a member that exited")
	}
}

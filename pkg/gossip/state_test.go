package gossip

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestTrackerTransitions(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tr := newTracker(clock)
	meta, _ := Meta{Name: "a", ClientURL: "http://a:2379", Health: HealthVoter}.Encode()
	n := &memberlist.Node{Name: "a", Addr: net.ParseIP("127.0.0.1"), Port: 7946, Meta: meta}
	step := func(f func(), want State) {
		t.Helper()
		now = now.Add(time.Second)
		f()
		s, _ := tr.get("a")
		if s.State != want {
			t.Fatalf("state %s, want %s", s.State, want)
		}
		if c := tr.counts(); len(c) != 1 || c[want] != 1 {
			t.Fatalf("counts %v, want the one peer %s", c, want)
		}
	}
	step(func() { tr.NotifyJoin(n) }, Alive)
	if s, _ := tr.get("a"); s.Meta.ClientURL != "http://a:2379" || s.Addr != "127.0.0.1:7946" {
		t.Fatalf("meta not decoded: %+v", s)
	}
	step(func() { tr.refuted("a") }, Alive) // not suspect: no change
	step(func() { tr.suspect("a") }, Suspect)
	suspectSince, _ := tr.get("a")
	step(func() { tr.suspect("a") }, Suspect) // again: since kept
	if s, _ := tr.get("a"); !s.Since.Equal(suspectSince.Since) {
		t.Fatal("a repeated suspicion moved the time")
	}
	step(func() { tr.refuted("a") }, Alive)
	step(func() { tr.suspect("a") }, Suspect)
	step(func() { tr.NotifyLeave(n) }, Dead)
	step(func() { tr.suspect("a") }, Dead) // suspicion of the dead is ignored
	step(func() { tr.NotifyJoin(n) }, Alive)
	leaving, _ := Meta{Name: "a", Health: HealthLeaving}.Encode()
	n2 := *n
	n2.Meta = leaving
	step(func() { tr.NotifyUpdate(&n2) }, Alive)
	step(func() { tr.NotifyLeave(&n2) }, Left)
	tr.suspect("nobody") // unknown peers are ignored
	if len(tr.snapshot()) != 1 {
		t.Fatal("unknown peer recorded")
	}
	select {
	case <-tr.changed:
	default:
		t.Fatal("changes not signalled")
	}
}

func TestLogBridgeRoutesSuspicionAndRateLimitsRejections(t *testing.T) {
	rec := newRecorder()
	now := time.Now()
	var suspected []string
	b := newLogBridge(slogNew(rec), func() time.Time { return now })
	b.onSuspect = func(n string) { suspected = append(suspected, n) }
	_, _ = b.Write([]byte("[INFO] memberlist: Suspect n2 has failed, no acks received\n"))
	for range 5 {
		_, _ = b.Write([]byte("[ERR] memberlist: Decrypt packet failed: No installed keys could decrypt the message from=10.0.0.9:4000\n"))
	}
	_, _ = b.Write([]byte("[ERR] memberlist: Decrypt packet failed: No installed keys could decrypt the message from=10.0.0.8:4000\n"))
	if len(suspected) != 1 || suspected[0] != "n2" {
		t.Fatalf("suspected = %v", suspected)
	}
	if c := rec.count("different key rejected"); c != 2 {
		t.Fatalf("rejections logged %d times, want once per sender (2)", c)
	}
	now = now.Add(rejectLogInterval)
	_, _ = b.Write([]byte("[ERR] memberlist: Decrypt packet failed: x from=10.0.0.9:4001\n"))
	if c := rec.count("different key rejected"); c != 3 {
		t.Fatalf("after the interval: %d, want 3", c)
	}
}

func slogNew(h recorder) *slog.Logger { return slog.New(h) }

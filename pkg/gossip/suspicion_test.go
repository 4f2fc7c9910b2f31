package gossip

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestSuspicionMessagesAndExpiry(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m, err := New(Config{Name: "self", Token: []byte("t"), Profile: ProfileFast, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		m.tracker.NotifyJoin(&memberlist.Node{Name: name, Addr: net.ParseIP("127.0.0.1"), Port: 1})
	}
	state := func(name string) State { s, _ := m.tracker.get(name); return s.State }

	m.receive(suspectBroadcast{name: "a"}.Message())
	if state("a") != Suspect || m.bcast.q.NumQueued() != 1 {
		t.Fatalf("after a suspect message: a %s, %d queued (want suspect, passed on once)", state("a"), m.bcast.q.NumQueued())
	}
	m.receive(suspectBroadcast{name: "a"}.Message())
	m.receive(suspectBroadcast{name: "self"}.Message())
	m.receive([]byte{'x', 'a'}) // a newer member's kind: ignored
	m.receive(nil)
	if m.bcast.q.NumQueued() != 1 || state("self") != "" {
		t.Fatalf("repeat, self and unknown messages changed things: %d queued", m.bcast.q.NumQueued())
	}

	m.localSuspect("b")
	if state("b") != Suspect {
		t.Fatalf("b %s after a local probe failed", state("b"))
	}
	m.localSuspect("self") // memberlist refutes its own suspicion
	if m.bcast.q.NumQueued() != 2 {
		t.Fatalf("%d queued, want 2", m.bcast.q.NumQueued())
	}

	c, _ := profileConfig(ProfileFast)
	now = now.Add(maxSuspicion(c, 3) - time.Millisecond)
	m.expireSuspects([]string{"self", "a", "b"})
	if state("a") != Suspect {
		t.Fatal("a suspect expired before memberlist's longest timeout")
	}
	now = now.Add(2 * time.Millisecond)
	m.expireSuspects([]string{"self", "a"}) // b no longer listed: dead is on its way
	if state("a") != Alive || state("b") != Suspect {
		t.Fatalf("after the longest timeout: a %s (want alive: refuted), b %s (want suspect)", state("a"), state("b"))
	}
}

func TestStateCountsAndTune(t *testing.T) {
	tuned := false
	m, err := New(Config{Name: "self", Token: []byte("t"), Tune: func(c *memberlist.Config) { tuned = true; c.RetransmitMult = 7 }})
	if err != nil {
		t.Fatal(err)
	}
	if !tuned || m.bcast.q.RetransmitMult != 7 {
		t.Fatal("Tune not applied to the memberlist configuration")
	}
	for _, name := range []string{"a", "b", "c"} {
		m.tracker.NotifyJoin(&memberlist.Node{Name: name, Addr: net.ParseIP("127.0.0.1"), Port: 1})
	}
	m.tracker.suspect("b")
	m.tracker.NotifyLeave(&memberlist.Node{Name: "c", Addr: net.ParseIP("127.0.0.1"), Port: 1})
	if got := m.StateCounts(); got[Alive] != 1 || got[Suspect] != 1 || got[Dead] != 1 {
		t.Fatalf("counts %v", got)
	}
}

// TestSuspicionEchoIsOldNews: a suspect message about a peer that has just
// answered this member's ping is not taken up again (nor passed on) for
// hearsayGrace; after that it is news again.
func TestSuspicionEchoIsOldNews(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m, err := New(Config{Name: "self", Token: []byte("t"), Profile: ProfileFast, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m.tracker.NotifyJoin(&memberlist.Node{Name: "a", Addr: net.ParseIP("127.0.0.1"), Port: 1})
	state := func() State { s, _ := m.tracker.get("a"); return s.State }

	m.receive(suspectBroadcast{name: "a"}.Message())
	if state() != Suspect || m.bcast.q.NumQueued() != 1 {
		t.Fatalf("first suspect message: a %s, %d queued", state(), m.bcast.q.NumQueued())
	}
	m.bcast.q.Reset()
	m.tracker.refuted("a") // it answered a ping (probeSuspects)
	c, _ := profileConfig(ProfileFast)
	grace := hearsayGrace(c)
	now = now.Add(grace - time.Millisecond)
	m.receive(suspectBroadcast{name: "a"}.Message())
	if state() != Alive || m.bcast.q.NumQueued() != 0 {
		t.Fatalf("an echo %s after it answered: a %s, %d queued (want alive, nothing passed on)", grace-time.Millisecond, state(), m.bcast.q.NumQueued())
	}
	m.localSuspect("a") // this member's own probe failing is never old news
	if state() != Suspect {
		t.Fatalf("a %s after a local probe failed", state())
	}
	m.tracker.refuted("a")
	now = now.Add(grace)
	m.receive(suspectBroadcast{name: "a"}.Message())
	if state() != Suspect {
		t.Fatalf("a suspect message %s after it answered: a %s, want suspect", grace, state())
	}
}

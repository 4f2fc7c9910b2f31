package gossip

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// FuzzReceive feeds the mesh's user-message handler what any member holding
// the gossip key may send. A message changes at most one known member from
// alive to suspect, is passed on at most once, never makes a member up,
// and never makes this member suspect itself.
func FuzzReceive(f *testing.F) {
	f.Add(suspectBroadcast{name: "a"}.Message())
	f.Add(suspectBroadcast{name: "self"}.Message())
	f.Add(suspectBroadcast{name: "ghost"}.Message())
	f.Add([]byte{'x', 'a'})
	f.Add([]byte{msgSuspect})
	f.Add([]byte{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := New(Config{Name: "self", Token: []byte("t"), Profile: ProfileFast, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		known := []string{"a", "b"}
		for _, name := range known {
			m.tracker.NotifyJoin(&memberlist.Node{Name: name, Addr: net.ParseIP("127.0.0.1"), Port: 1})
		}
		m.receive(msg)
		m.receive(msg) // the same news twice is passed on once
		if q := m.bcast.q.NumQueued(); q > 1 {
			t.Fatalf("%d broadcasts queued from one message", q)
		}
		suspects := m.tracker.inState(Suspect)
		if len(suspects) > 1 {
			t.Fatalf("one message made %d suspects", len(suspects))
		}
		for _, s := range suspects {
			if s.Name != "a" && s.Name != "b" {
				t.Fatalf("a message made up member %q", s.Name)
			}
		}
		if _, ok := m.tracker.get("self"); ok {
			t.Fatal("this member tracks itself after a message")
		}
		if len(suspects) == 1 && m.bcast.q.NumQueued() != 1 {
			t.Fatalf("news not passed on: %d queued", m.bcast.q.NumQueued())
		}
	})
}

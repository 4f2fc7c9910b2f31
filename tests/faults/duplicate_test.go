package faults

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestTwoAgentsSameName: three voters under a write workload; a second
// agent named cp-3 starts on another host (namespace 4, its own data
// dir, the same join token). Within 60 s it is refused (exits non-zero,
// naming the name in use); meanwhile and after: the same members, cp-3's
// member at its own peer URL and answering, its node record's peer URL
// unchanged, no membership operation; the clients' history stays
// linearizable.
//
// A smoke scenario (about 15 s).
func TestTwoAgentsSameName(t *testing.T) {
	s := newScenario(t, "two agents started with the same name", 4, 3)
	c := s.c
	s.startWorkload(3, 15)
	s.waitWrites(30*time.Second, 100)
	s.waitCaughtUp(60 * time.Second)
	before := s.memberIDs()
	started := time.Now()
	dup := c.startAgentAs(3, "cp-3", filepath.Join(c.dir, "dup-cp-3"))
	c.nodes[3].agent = dup // stopped with the others
	testwait.True(t, 60*time.Second, "the second cp-3 refused (exited)", func() bool {
		if got := s.memberIDs(); got != nil && !slices.Equal(got, before) {
			t.Fatalf("members changed: %x, were %x", got, before)
		}
		if st := s.memberState(3); st != "absent" && st != "" {
			t.Fatalf("the second cp-3's peer URL is a %s", st)
		}
		ok, _ := dup.exited()
		return ok
	})
	refused := time.Since(started)
	if _, code := dup.exited(); code == 0 || !strings.Contains(tail(dup.log, 20), "node name in use") {
		s.w.breach("the second cp-3 exited %d without naming the name in use:\n%s", code, tail(dup.log, 6))
	}
	t.Logf("the second cp-3 was refused %s after it started", refused.Round(time.Millisecond))
	n := &api.Node{}
	if err := s.st.Get(t.Context(), store.NodeKey("cp-3"), n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.PeerURL != c.peerURL(2) {
		s.w.breach("cp-3's node record names peer URL %s, not %s", n.Spec.PeerURL, c.peerURL(2))
	}
	if ops := s.opsSince(started); len(ops) > 0 {
		s.w.breach("operations started: %v", ops)
	}
	stopped := time.Now()
	if !poll(10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.cli.Status(ctx, c.clientURL(2))
		return err == nil
	}) {
		s.w.breach("the first cp-3 does not answer for 10 s")
	}
	s.waitCaughtUp(60 * time.Second)
	took := time.Since(stopped)
	s.waitWrites(30*time.Second, 100)
	s.finish(took)
}

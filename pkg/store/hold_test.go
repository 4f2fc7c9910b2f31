package store

import (
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
)

// TestHoldSeen: Hold reads the operation in flight once while ActiveOpKey
// stays as it was when the operation was found not to hold the cluster;
// a new write of the key, even of the same name, is read again, and a
// restore is read on every call.
func TestHoldSeen(t *testing.T) {
	s := newStore(t, etcdtest.Start(t, 1))
	c := ctx(t)
	putOp := func(name string, typ api.OpType, phase api.OpPhase) {
		t.Helper()
		op := api.NewOperation(name)
		op.Spec = api.OperationSpec{Type: typ, Node: "cp-1", StartedBy: "test"}
		op.Status.Phase = phase
		if err := s.Put(c, OpKey(name), op); err != nil {
			t.Fatal(err)
		}
	}
	activate := func(name string) {
		t.Helper()
		if _, err := s.Client().Put(c, ActiveOpKey, name); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(seen *HoldSeen) string {
		t.Helper()
		why, _, _, err := s.Hold(c, seen)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	var seen HoldSeen

	putOp("op-1", api.OpJoin, api.OpRunning)
	activate("op-1")
	if why := hold(&seen); why != "" {
		t.Fatalf("a join holds the cluster: %s", why)
	}
	// The operation's object is rewritten as a restore behind an
	// unchanged ActiveOpKey (nico never does that: a type is set when an
	// operation starts): the remembered key answers without reading it,
	// which is the read HoldSeen saves.
	putOp("op-1", api.OpRestore, api.OpRunning)
	if why := hold(&seen); why != "" {
		t.Fatalf("with the key unchanged, Hold read the operation again: %s", why)
	}
	if why := hold(nil); !strings.Contains(why, "op-1 holds the cluster") {
		t.Fatalf("without HoldSeen, a running restore gives hold %q", why)
	}
	// The key written again: read again.
	activate("op-1")
	if why := hold(&seen); !strings.Contains(why, "op-1 holds the cluster") {
		t.Fatalf("after ActiveOpKey was written again, hold %q; want the running restore", why)
	}
	// A restore is never remembered: its phase decides.
	putOp("op-1", api.OpRestore, api.OpSucceeded)
	if why := hold(&seen); why != "" {
		t.Fatalf("a finished restore holds the cluster: %s", why)
	}
	putOp("op-1", api.OpRestore, api.OpRunning)
	if why := hold(&seen); !strings.Contains(why, "op-1 holds the cluster") {
		t.Fatalf("a restore running again behind an unchanged key gives hold %q", why)
	}
	// Another operation in flight is read.
	putOp("op-2", api.OpRecover, api.OpRunning)
	activate("op-2")
	if why := hold(&seen); !strings.Contains(why, "op-2 holds the cluster") {
		t.Fatalf("a running recovery gives hold %q", why)
	}
}

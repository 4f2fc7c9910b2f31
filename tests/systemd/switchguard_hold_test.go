package systemd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/switchguard"
	"github.com/homystack/nico/tests/systemd/harness"
)

// holdsAndGivesBack runs the switch guard's other promises on the fleet of
// TestParallelSwitchesTakeTheSlotOneAtATime as it grows (cp1 and cp2
// voters, cp1 leading the coordinators, w1 a data-plane host; it boots
// cp3), each with the module's pre-switch script run as
// switch-to-configuration runs it:
//
//   - a switch is held while a join is in flight: cp2's check (hosts.nix
//     cp2-hold, --hold 30s) waits, naming cp3's join, while cp3's etcd is
//     held at a gate, and is granted once cp3 is a voter;
//   - a data-plane host switches without waiting: w1's generation carries
//     no guard, and its switch is done while cp2 holds the slot;
//   - a host whose switch fails after its grant (it never reaches the
//     granted generation) gives the slot back at its hold: the leader
//     answers Expired and frees the slot about 30 s after the grant.
func holdsAndGivesBack(ctx context.Context, t *testing.T, c *cluster, st *store.Store) {
	t.Helper()
	cp1, cp2, w1 := c.guests["cp1"], c.guests["cp2"], c.guests["w1"]
	// A join in flight: cp3's member is added as a learner, its etcd
	// held at a gate (join_test.go's etcdGate).
	cp3 := c.boot(ctx, "cp3", func(cfg *harness.Config) {
		cfg.Files["/etc/systemd/system/etcd.service.d/nico-test-gate.conf"] = harness.File{Data: []byte(etcdGate)}
	})
	cp3.startNoBlock(ctx, "nico-agent.service")
	cp3.waitFor(ctx, "cp3's etcd.service waits at the gate", func() error {
		if st := cp3.prop(ctx, "etcd.service", "ActiveState"); st != "activating" {
			return fmt.Errorf("%w: etcd.service %v", errNotYet, st)
		}
		return nil
	})

	// cp2 switches: its check waits for the join.
	top := "/nix/store/" + strings.Repeat("6", 32) + "-nixos-system-cp2-hold"
	cp2.installClosure(ctx, "cp2-hold", top)
	type result struct {
		out string
		err error
	}
	checked := make(chan result, 1)
	asked := time.Now()
	go func() {
		out, err := cp2.Exec(ctx, "bash", c.fx.Hosts["cp2-hold"].PreSwitchCheck, top, "switch")
		checked <- result{string(out), err}
	}()
	cp1.waitFor(ctx, "cp2's switch waits for cp3's join", func() error {
		r := &api.SwitchRequest{}
		if err := st.Get(ctx, store.SwitchKey("cp2"), r); err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		if r.Status.Phase != api.SwitchWaiting || !strings.Contains(r.Status.Message, "the join of cp3") {
			return fmt.Errorf("%w: %s: %s", errNotYet, r.Status.Phase, r.Status.Message)
		}
		return nil
	})
	select {
	case r := <-checked:
		t.Fatalf("cp2's check ended while cp3's join held the slot: %v\n%s", r.err, r.out)
	default:
	}
	if out, err := cp3.Exec(ctx, "touch", "/run/nico-test-etcd-go"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := <-checked
	grantedAt := time.Now()
	if r.err != nil {
		t.Fatalf("cp2's pre-switch check failed after the join: %v\n%s", r.err, r.out)
	}
	t.Logf("cp2's check, granted %v after it asked, once cp3 joined:\n%s", grantedAt.Sub(asked).Round(100*time.Millisecond), r.out)
	if !strings.Contains(r.out, "the slot is held by the join of cp3") {
		t.Errorf("cp2's check printed no wait for cp3's join:\n%s", r.out)
	}
	wantVoters(ctx, t, cp1, "cp1", "cp2", "cp3")

	// The data-plane host's switch runs no guard and does not wait.
	if s := c.fx.Hosts["w1-switched"].PreSwitchCheck; s != "" {
		t.Fatalf("w1's generation has a pre-switch check %s, want none on a data-plane host", s)
	}
	wStart := time.Now()
	did := w1.switchTo(ctx, "w1-switched")
	wTook := time.Since(wStart)
	sw := &api.SwitchRequest{}
	if err := st.Get(ctx, store.SwitchKey("cp2"), sw); err != nil {
		t.Fatal(err)
	}
	if sw.Status.Phase != api.SwitchGranted {
		t.Fatalf("cp2's slot after w1's switch: %s: %s, want still Granted", sw.Status.Phase, sw.Status.Message)
	}
	t.Logf("w1 (data plane) switched in %v while cp2 held the slot: %v", wTook.Round(time.Millisecond), did)

	// cp2's switch fails after its grant: it stays on its generation, and
	// the leader takes the slot back at the 30 s hold.
	cp1.waitFor(ctx, "cp2's slot taken back at its hold", func() error {
		if err := st.Get(ctx, store.SwitchKey("cp2"), sw); err != nil {
			return err
		}
		if sw.Status.Phase != api.SwitchExpired {
			return fmt.Errorf("%w: %s: %s", errNotYet, sw.Status.Phase, sw.Status.Message)
		}
		if kv, err := st.GetKV(ctx, store.ActiveOpKey); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: the slot is still held: %v %v", errNotYet, kv, err)
		}
		return nil
	})
	back := time.Since(grantedAt)
	op := &api.Operation{}
	if err := st.Get(ctx, store.OpKey(switchguard.OpName("cp2", sw.Spec.Attempt)), op); err != nil {
		t.Fatal(err)
	}
	if op.Status.Phase != api.OpFailed {
		t.Errorf("cp2's expired switch operation is %s, want Failed: %s", op.Status.Phase, op.Status.Message)
	}
	t.Logf("cp2's slot back %v after its grant (hold 30s): %s", back.Round(100*time.Millisecond), sw.Status.Message)
	if back < 25*time.Second {
		t.Errorf("the slot came back %v after the grant, before the 30s hold", back)
	}
}
